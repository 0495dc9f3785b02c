package ccm

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app/config"
	"k8s.io/klog/v2"
)

// Leader election that gives the Lease back on SIGTERM.
//
// k8s.io/cloud-provider's app runs leader election with
// leaderelection.RunOrDie(context.TODO(), ...) and no ReleaseOnCancel
// (app/controllermanager.go, leaderElectAndRun): a leader that is asked to stop
// dies holding the Lease, and its successor waits out the lease duration (15 s
// by default, plus its retry period) with no CCM running. Every rolling update
// of a CCM costs that window.
//
// cloudgate runs the election itself. The app's own election is switched off
// in the completed config (LeaderElect=false), so the app serves /healthz and
// /metrics at once and goes straight to starting its controllers; the first
// thing it does there, before any controller starts, is cloud.Initialize, and
// the cloud handOver returns blocks in Initialize until this process holds
// the Lease. The election is client-go's, configured from the same flags
// (--leader-elect-resource-lock, -resource-namespace, -resource-name,
// -lease-duration, -renew-deadline, -retry-period) with the same identity
// (hostname_UUID), plus ReleaseOnCancel: on SIGTERM or SIGINT the election's
// context ends, the leader stops renewing, writes the Lease back released
// (holder empty, lease duration 1 s, as client-go's release does), and the
// process exits 0. A standby polls every retry period, so it takes over within
// about one retry period of the signal instead of a lease duration.
//
// As with any ReleaseOnCancel user, the controllers are not awaited: they run
// until the process exits, right after the release is written; a standby
// acquires at its next poll (retry period, 2 s by default), by which time the
// process has gone. A leader that fails to renew exits 1, as the app's does
// ("leaderelection lost"). With leader migration on, the app's own election
// is left as it is (this wiring knows one lock).

// handOver returns cloud unchanged when leader election is off (or leader
// migration is on); otherwise it turns the app's election off in c and
// returns cloud gated on cloudgate's own election.
func handOver(c *config.CompletedConfig, cloud cloudprovider.Interface) cloudprovider.Interface {
	generic := &c.ComponentConfig.Generic
	if !generic.LeaderElection.LeaderElect || generic.LeaderMigrationEnabled {
		return cloud
	}
	le := generic.LeaderElection
	generic.LeaderElection.LeaderElect = false // the app now runs its controllers unguarded: Initialize guards them
	return &gatedCloud{Interface: cloud, lead: func() {
		id, err := os.Hostname()
		if err != nil {
			klog.Fatalf("leader election: hostname: %v", err)
		}
		id += "_" + string(uuid.NewUUID()) // as the app's: two processes on one host stay distinct
		lock, err := resourcelock.NewFromKubeconfig(le.ResourceLock, le.ResourceNamespace, le.ResourceName,
			resourcelock.ResourceLockConfig{Identity: id, EventRecorder: c.EventRecorder},
			c.Kubeconfig, le.RenewDeadline.Duration)
		if err != nil {
			klog.Fatalf("error creating lock: %v", err)
		}
		leading := make(chan struct{})
		elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:            lock,
			LeaseDuration:   le.LeaseDuration.Duration,
			RenewDeadline:   le.RenewDeadline.Duration,
			RetryPeriod:     le.RetryPeriod.Duration,
			ReleaseOnCancel: true,
			Name:            le.ResourceName,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(context.Context) { close(leading) },
				OnStoppedLeading: func() {}, // the process exits when Run returns
			},
		})
		if err != nil {
			klog.Fatalf("leader election: %v", err)
		}
		lease := le.ResourceNamespace + "/" + le.ResourceName
		go runElection(elector, lease)
		klog.InfoS("Waiting for the Lease before starting the controllers", "lease", lease, "identity", id)
		<-leading
		klog.InfoS("Leading: starting the controllers", "lease", lease, "identity", id)
	}}
}

// runElection runs the election until the process ends it: on SIGTERM or
// SIGINT the election's context ends (the Lease is released) and the process
// exits 0; if this process stops leading otherwise, it exits 1.
func runElection(elector *leaderelection.LeaderElector, lease string) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	elector.Run(ctx)
	if ctx.Err() != nil {
		klog.InfoS("Stopped on a signal; the Lease is released if this process held it", "lease", lease)
		klog.FlushAndExit(klog.ExitFlushTimeout, 0)
	}
	klog.ErrorS(nil, "leaderelection lost", "lease", lease)
	klog.FlushAndExit(klog.ExitFlushTimeout, 1)
}

// gatedCloud is a cloud whose Initialize — the first thing the app does
// before starting its controllers — waits until this process leads. Every
// other method is the cloud's own; SetInformers and Upstream are forwarded so
// that type assertions on the cloud see what they saw before.
type gatedCloud struct {
	cloudprovider.Interface
	lead func() // blocks until this process holds the Lease
}

func (g *gatedCloud) Initialize(cb cloudprovider.ControllerClientBuilder, stop <-chan struct{}) {
	g.lead()
	g.Interface.Initialize(cb, stop)
}

// SetInformers forwards to the cloud if it is a cloudprovider.InformerUser (the
// app calls it right after Initialize, only on clouds that are).
func (g *gatedCloud) SetInformers(f informers.SharedInformerFactory) {
	if iu, ok := g.Interface.(cloudprovider.InformerUser); ok {
		iu.SetInformers(f)
	}
}

// Unwrap returns the gated cloud, for code that looks inside wrappers
// (provider.Unwrapper: the AWS CCM finds the AWS provider for its tagging
// controller that way).
func (g *gatedCloud) Unwrap() cloudprovider.Interface { return g.Interface }
