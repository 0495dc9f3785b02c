package gcebench

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	cloudprovider "k8s.io/cloud-provider"
)

// Initialize gives the provider the cluster's clients with one change: the GCE provider
// watches its cluster-ID ConfigMap through CoreV1().RESTClient(), which bench's fake API
// server does not have (nil). It gets a REST client for an address nothing listens on
// (127.0.0.1:1): that watch fails and retries, as with an API server that is down; no
// Compute call depends on it.
func (c *counting) Initialize(b cloudprovider.ControllerClientBuilder, stop <-chan struct{}) {
	if b != nil {
		b = restBuilder{b}
	}
	c.Interface.Initialize(b, stop)
}

type restBuilder struct {
	cloudprovider.ControllerClientBuilder
}

func (b restBuilder) Client(name string) (kubernetes.Interface, error) {
	cl, err := b.ControllerClientBuilder.Client(name)
	if err != nil {
		return nil, err
	}
	return withREST(cl), nil
}

func (b restBuilder) ClientOrDie(name string) kubernetes.Interface {
	return withREST(b.ControllerClientBuilder.ClientOrDie(name))
}

func withREST(cl kubernetes.Interface) kubernetes.Interface {
	rc, err := rest.RESTClientFor(&rest.Config{Host: "http://127.0.0.1:1", APIPath: "/api", ContentConfig: rest.ContentConfig{
		GroupVersion: &corev1.SchemeGroupVersion, NegotiatedSerializer: scheme.Codecs.WithoutConversion(),
	}})
	if err != nil { // only for a malformed config, which this is not
		panic(err)
	}
	return clientWithREST{Interface: cl, rc: rc}
}

type clientWithREST struct {
	kubernetes.Interface
	rc rest.Interface
}

func (c clientWithREST) CoreV1() corev1client.CoreV1Interface {
	return coreWithREST{CoreV1Interface: c.Interface.CoreV1(), rc: c.rc}
}

type coreWithREST struct {
	corev1client.CoreV1Interface
	rc rest.Interface
}

func (c coreWithREST) RESTClient() rest.Interface { return c.rc }
