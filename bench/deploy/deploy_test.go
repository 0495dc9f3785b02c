package deploy_test

import (
	"maps"
	"path"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/cloudgate/cloudgate/bench/cmd/cloud-controller-manager/command"
	"github.com/cloudgate/cloudgate/deploy"
	"github.com/cloudgate/cloudgate/provider"
)

// all decodes every manifest file, failing the test on the first error.
func all(t *testing.T) []runtime.Object {
	t.Helper()
	files := deploy.Files()
	if len(files) == 0 {
		t.Fatal("no manifests embedded")
	}
	var objs []runtime.Object
	for _, f := range files {
		o, err := deploy.Objects(f)
		if err != nil {
			t.Fatal(err)
		}
		if len(o) == 0 {
			t.Fatalf("%s: no objects", f)
		}
		objs = append(objs, o...)
	}
	return objs
}

func TestManifestsDecode(t *testing.T) {
	kinds := map[string]int{}
	for _, o := range all(t) {
		kinds[o.GetObjectKind().GroupVersionKind().Kind]++
	}
	for _, k := range []string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role",
		"RoleBinding", "ConfigMap", "Secret", "Deployment", "DaemonSet"} {
		if kinds[k] == 0 {
			t.Errorf("no %s in deploy/ (kinds: %v)", k, kinds)
		}
	}
}

// workload is a Deployment or DaemonSet's pod template, by name.
type workload struct {
	name string
	spec corev1.PodSpec
}

func workloads(t *testing.T, objs []runtime.Object) []workload {
	var ws []workload
	for _, o := range objs {
		switch o := o.(type) {
		case *appsv1.Deployment:
			if r := o.Spec.Replicas; r == nil || *r != 2 {
				t.Errorf("Deployment %s: want 2 replicas (leader election picks the active one), got %v", o.Name, deref(r))
			}
			ws = append(ws, workload{"Deployment " + o.Name, o.Spec.Template.Spec})
		case *appsv1.DaemonSet:
			ws = append(ws, workload{"DaemonSet " + o.Name, o.Spec.Template.Spec})
		}
	}
	if len(ws) != 2 {
		t.Fatalf("want a Deployment and a DaemonSet, got %d workloads", len(ws))
	}
	return ws
}

func deref[T any](p *T) any {
	if p == nil {
		return "none"
	}
	return *p
}

// flags splits container arguments of the form --name[=value] into a map.
func flags(t *testing.T, where string, args []string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, a := range args {
		name, value, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !strings.HasPrefix(a, "--") || name == "" {
			t.Errorf("%s: argument %q is not of the form --name[=value]", where, a)
			continue
		}
		if !ok {
			value = "true"
		}
		m[name] = value
	}
	return m
}

// TestFlagsExistOnBinary checks every argument given to the CCM container against the
// command the binary runs (package command): the flag exists and its value parses.
func TestFlagsExistOnBinary(t *testing.T) {
	for _, w := range workloads(t, all(t)) {
		if len(w.spec.Containers) != 1 {
			t.Fatalf("%s: want one container, got %d", w.name, len(w.spec.Containers))
		}
		c := w.spec.Containers[0]
		argv := append(slices.Clone(c.Command), c.Args...)
		if len(argv) < 2 || path.Base(argv[0]) != "cloud-controller-manager" {
			t.Fatalf("%s: command %q does not run cloud-controller-manager", w.name, argv)
		}
		cmd, err := command.New(make(chan struct{}))
		if err != nil {
			t.Fatal(err)
		}
		for name := range flags(t, w.name, argv[1:]) {
			if cmd.Flags().Lookup(name) == nil {
				t.Errorf("%s: flag --%s does not exist on cloud-controller-manager", w.name, name)
			}
		}
		if err := cmd.ParseFlags(argv[1:]); err != nil {
			t.Errorf("%s: cloud-controller-manager rejects the arguments: %v", w.name, err)
		}
	}
}

// sources are the ConfigMaps and Secrets of deploy/, by name, as files by key.
type sources struct {
	configMaps, secrets map[string]map[string]string
}

// mountedFile returns the content of the file at path in the pod, when path is a key of a
// ConfigMap or Secret volume mounted in the pod's container and that object is in deploy/.
func (src sources) mountedFile(spec corev1.PodSpec, file string) (string, bool) {
	for _, m := range spec.Containers[0].VolumeMounts {
		if path.Dir(file) != m.MountPath {
			continue
		}
		for _, v := range spec.Volumes {
			var data map[string]string
			switch {
			case v.Name != m.Name:
				continue
			case v.ConfigMap != nil:
				data = src.configMaps[v.ConfigMap.Name]
			case v.Secret != nil:
				data = src.secrets[v.Secret.SecretName]
			}
			content, ok := data[path.Base(file)]
			return content, ok
		}
	}
	return "", false
}

// TestWorkloadsWiring checks what the manifests must agree on: the provider; its config
// file, mounted from the ConfigMap, valid for cloudgate and naming an upstream the binary
// links; the upstream's config file, mounted from the Secret, which that upstream accepts;
// leader election; the ServiceAccount bound by the RBAC; and the toleration that lets the
// CCM start on uninitialized nodes.
func TestWorkloadsWiring(t *testing.T) {
	objs := all(t)
	src := sources{configMaps: map[string]map[string]string{}, secrets: map[string]map[string]string{}}
	bound := map[string]bool{}
	for _, o := range objs {
		switch o := o.(type) {
		case *corev1.ConfigMap:
			src.configMaps[o.Name] = o.Data
		case *corev1.Secret:
			data := maps.Clone(o.StringData)
			if data == nil {
				data = map[string]string{}
			}
			for k, v := range o.Data {
				data[k] = string(v)
			}
			src.secrets[o.Name] = data
		case *rbacv1.ClusterRoleBinding:
			for _, s := range o.Subjects {
				bound[s.Namespace+"/"+s.Name] = true
			}
		}
	}
	for _, w := range workloads(t, objs) {
		f := flags(t, w.name, w.spec.Containers[0].Command[1:])
		for name, want := range map[string]string{"cloud-provider": "cloudgate", "leader-elect": "true"} {
			if f[name] != want {
				t.Errorf("%s: --%s=%q, want %q", w.name, name, f[name], want)
			}
		}
		if !bound["kube-system/"+w.spec.ServiceAccountName] {
			t.Errorf("%s: ServiceAccount %q is not bound by rbac.yaml", w.name, w.spec.ServiceAccountName)
		}
		tolerated := false
		for _, tol := range w.spec.Tolerations {
			tolerated = tolerated || tol.Key == "node.cloudprovider.kubernetes.io/uninitialized"
		}
		if !tolerated {
			t.Errorf("%s: does not tolerate node.cloudprovider.kubernetes.io/uninitialized", w.name)
		}

		text, ok := src.mountedFile(w.spec, f["cloud-config"])
		if !ok {
			t.Errorf("%s: --cloud-config=%q is not a file of a ConfigMap or Secret in deploy/ mounted in the container", w.name, f["cloud-config"])
			continue
		}
		cfg, err := provider.LoadConfig(strings.NewReader(text))
		if err != nil {
			t.Errorf("%s: %s: %v", w.name, f["cloud-config"], err)
			continue
		}
		up := cfg.Upstream
		if !cloudprovider.IsCloudProvider(up.Name) {
			t.Errorf("%s: upstream %q is not linked into cloud-controller-manager", w.name, up.Name)
			continue
		}
		if up.ConfigFile != "" {
			if up.Config, ok = src.mountedFile(w.spec, up.ConfigFile); !ok {
				t.Errorf("%s: upstream.configFile %q is not a file of a ConfigMap or Secret in deploy/ mounted in the container", w.name, up.ConfigFile)
				continue
			}
		}
		// Building the upstream client checks its config; it makes no call.
		if _, err := cloudprovider.GetCloudProvider(up.Name, strings.NewReader(up.Config)); err != nil {
			t.Errorf("%s: upstream %q rejects its config: %v", w.name, up.Name, err)
		}
	}
}
