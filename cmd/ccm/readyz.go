package ccm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/spf13/pflag"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"

	"github.com/cloudgate/cloudgate/provider"
)

// Readiness, served apart from the app's /healthz.
//
// The app serves /healthz on --secure-port from a mux it builds inside its Run, where a
// binary cannot add a path or a check (its checks come from the controllers, which run
// only in the leader). Readiness must say more than /healthz: whether this replica could
// serve its cloud calls if it led (provider.ReadinessChecker: with limits.shared and
// failureMode closed it needs Redis), in the standby too, since a rollout hands the Lease
// to its new Pods. Folding that into /healthz would also fail the livenessProbe, and a
// Redis outage would restart every replica. So /readyz has its own listener,
// --readyz-bind-address (none when empty): plain HTTP, as kube-proxy's /healthz, without
// credentials (its answer names what failed and how to fix it, never a secret).

// readyzTimeout bounds one readiness check (the chart's probe gives up after 5 s).
const readyzTimeout = 4 * time.Second

// readyz is the --readyz-bind-address flag and its server.
type readyz struct {
	addr string
}

func (r *readyz) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&r.addr, "readyz-bind-address", "",
		"host:port (\":10269\": every address) to serve /readyz on, plain HTTP: 200 when this replica could serve its cloud calls if it led, "+
			"503 with the reason when not (cloudgate with limits.shared.failureMode closed and Redis unreachable); empty: not served")
}

// serve starts the /readyz server for cloud when the flag is set; a port it cannot
// bind ends the process, as the app does for --secure-port.
func (r *readyz) serve(cloud cloudprovider.Interface) {
	if r.addr == "" {
		return
	}
	if _, err := listenReadyz(r.addr, cloud); err != nil {
		klog.Fatalf("--readyz-bind-address=%s: %v (choose a free port, or leave the flag empty to serve no /readyz)", r.addr, err)
	}
}

// listenReadyz serves /readyz for cloud on addr and returns the address it listens on.
func listenReadyz(addr string, cloud cloudprovider.Interface) (net.Addr, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/readyz", readyzHandler(readinessOf(cloud)))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: readyzTimeout}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.Fatalf("--readyz-bind-address=%s: serving /readyz: %v", addr, err)
		}
	}()
	klog.InfoS("Serving /readyz", "address", ln.Addr().String())
	return ln.Addr(), nil
}

// readinessOf finds the readiness checker in cloud's wrappers (the leader-election gate,
// cloudgate's cloud); nil when there is none (a provider run without cloudgate: ready
// once the process serves).
func readinessOf(cloud cloudprovider.Interface) provider.ReadinessChecker {
	for c := cloud; c != nil; {
		if r, ok := c.(provider.ReadinessChecker); ok {
			return r
		}
		u, ok := c.(provider.Unwrapper)
		if !ok {
			break
		}
		c = u.Unwrap()
	}
	return nil
}

// readyzHandler answers 200 "ok" when rc is nil or ready, else 503 with the reason; it
// logs each change between the two, so the reason is in the log as well as in the Pod's
// events.
func readyzHandler(rc provider.ReadinessChecker) http.Handler {
	var mu sync.Mutex
	last := "" // the last reason given, "" while ready
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var err error
		if rc != nil {
			ctx, cancel := context.WithTimeout(req.Context(), readyzTimeout)
			err = rc.Ready(ctx)
			cancel()
		}
		reason := ""
		if err != nil {
			reason = err.Error()
		}
		mu.Lock()
		changed := reason != last
		last = reason
		mu.Unlock()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if err != nil {
			if changed {
				klog.ErrorS(err, "Not ready: this replica could not serve its cloud calls if it led")
			}
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "not ready: %v\n", err)
			return
		}
		if changed {
			klog.InfoS("Ready again: this replica can serve its cloud calls")
		}
		fmt.Fprintln(w, "ok")
	})
}
