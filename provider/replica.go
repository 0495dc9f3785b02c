package provider

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"
)

// clusterMemberTimeout bounds reading the cluster's identity at Initialize.
const clusterMemberTimeout = 10 * time.Second

// clusterMemberID names this cluster's member of the fleet (limits.shared):
// "cluster-" and the UID of the kube-system Namespace, which every replica
// of the cluster's CCM reads alike and no other cluster shares (the UID is
// set when the cluster is created and kept for its life). One name per
// cluster, not per process, is what makes failover cheap: the new leader's
// first heartbeat renews the dead leader's registration, so the account
// never counts the dead process as a fallen member whose share it must
// hold back until it is forgotten (limits.shared.forgetAfter: 600 heartbeats). Leader
// election keeps two replicas from using the name at once, apart from the
// renew deadline's overlap, during which both draw from the one shared
// budget in Redis (only their local fallback shares would add up).
//
// Without a client or the permission to get the Namespace (deploy/rbac.yaml
// grants it) it returns "", a random id per process, and says so.
func clusterMemberID(b cloudprovider.ControllerClientBuilder) string {
	if b == nil {
		return ""
	}
	c, err := b.Client(EventsClientName)
	if err != nil {
		klog.ErrorS(err, "cloudgate: no Kubernetes client to name this cluster's fleet member; joining under a random id (a failover then holds the dead leader's share until it is forgotten)")
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), clusterMemberTimeout)
	defer cancel()
	ns, err := c.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
	if err != nil || ns.UID == "" {
		klog.ErrorS(err, "cloudgate: cannot read the kube-system Namespace to name this cluster's fleet member (RBAC: get namespaces/kube-system); joining under a random id (a failover then holds the dead leader's share until it is forgotten)")
		return ""
	}
	return "cluster-" + string(ns.UID)
}
