package provider

// This file is the whole surface a provider author or an embedding binary
// needs besides New and Config: what New returns (Cloud), how to look
// inside wrappers (Unwrapper), and the optional interfaces an upstream may
// implement to be batched (BatchInstances), listed (InstanceLister) or to
// classify its own throttling errors (ProviderClassifier).
//
// Stability: these names, their methods and the documented meaning of
// their fields follow semantic versioning from v1: nothing here is removed
// or changes meaning within a major version, and a method is never added
// to an interface an upstream implements (BatchInstances, InstanceLister,
// ProviderClassifier); a new capability comes as a new optional interface.
// Everything else exported by this package (Config's fields excepted) may
// change between minor versions.

import (
	"context"
	"sync"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/cloudgate/cloudgate/limiter"
)

// Cloud is what New returns: the upstream behind cloudgate, as a
// cloudprovider.Interface, with its life cycle. Its dynamic type also
// implements cloudprovider.InformerUser exactly when the upstream does.
type Cloud interface {
	cloudprovider.Interface
	Unwrapper
	// Close stops cloudgate's goroutines (list prefetch) and waits for
	// them and for batch calls in flight; with limits.shared it leaves the
	// fleet. The upstream is not closed. It returns nil.
	Close() error
}

// Unwrapper is a cloud that wraps another, as cloudgate does: Unwrap
// returns the wrapped provider itself, for code that needs its own type
// (the AWS provider's tagging controller asserts *aws.Cloud). Calls made
// on it bypass the wrapper. A provider adapter that wraps a provider should
// implement it too, so a binary finds the provider in a loop:
//
//	for c := cloud; c != nil; {
//		if aws, ok := c.(*aws.Cloud); ok {
//			return aws
//		}
//		u, ok := c.(provider.Unwrapper)
//		if !ok {
//			break
//		}
//		c = u.Unwrap()
//	}
type Unwrapper interface {
	Unwrap() cloudprovider.Interface
}

// ProviderClassifier is the throttle-classifier hook: implemented by the
// upstream cloudprovider.Interface value (or a provider adapter), it
// recognises the provider's own throttling errors, typically from the
// error codes its SDK returns, before cloudgate's message patterns
// (throttle.patterns) are tried. See limiter.ProviderClassifier.
type ProviderClassifier = limiter.ProviderClassifier

// ErrorClassifier is the error-classification hook: it says what each of a
// provider's errors tells about the cloud (throttled, a per-request
// refusal such as a 404, or a cloud failure), from its SDK's error types and
// codes, before cloudgate's generic rules. The breakers count only cloud
// failures. An upstream value (or a provider adapter) may implement it;
// for an unmodified provider, its module registers one for the provider's
// name with RegisterErrorClassifier. limiter.ErrorTable builds one from
// rules. It is asked before a ProviderClassifier. See
// limiter.ThrottleClassifier.Class for the order.
type ErrorClassifier = limiter.ErrorClassifier

var errorClassifiers = struct {
	sync.Mutex
	byName map[string]ErrorClassifier
}{byName: map[string]ErrorClassifier{}}

// RegisterErrorClassifier makes c the error classification of the
// upstream whose ProviderName() is name, unless the upstream implements
// ErrorClassifier itself. Call it from an init function of the provider's
// module (the one that registers the provider, or a package the CCM's
// main imports beside it); a later registration for the same name
// replaces an earlier one.
func RegisterErrorClassifier(name string, c ErrorClassifier) {
	errorClassifiers.Lock()
	defer errorClassifiers.Unlock()
	errorClassifiers.byName[name] = c
}

// errorClassifierOf is upstream's error classification: its own, else the
// one registered for its name, else nil.
func errorClassifierOf(upstream cloudprovider.Interface) ErrorClassifier {
	if ec, ok := upstream.(ErrorClassifier); ok {
		return ec
	}
	errorClassifiers.Lock()
	defer errorClassifiers.Unlock()
	return errorClassifiers.byName[upstream.ProviderName()]
}

// BatchInstances is an optional interface that an upstream's InstancesV2
// implementation may satisfy to answer many nodes in one cloud call (AWS
// DescribeInstances with many IDs, a GCE aggregatedList filter, an Azure VMSS
// list). When the upstream's InstancesV2 value implements it, cloudgate
// coalesces concurrent InstanceMetadata, InstanceExists and InstanceShutdown
// calls into BatchInstanceStatus calls.
//
// A provider author adds it with one method on the type that already
// implements cloudprovider.InstancesV2, plus MaxBatchSize.
type BatchInstances interface {
	// MaxBatchSize is the largest number of nodes one BatchInstanceStatus call
	// accepts. cloudgate never sends more. It is read once, after the
	// upstream's Initialize (or at first use, if that comes first); <= 0
	// turns batching off (per-node calls).
	MaxBatchSize() int
	// BatchInstanceStatus looks up every node in one call. On success it
	// returns exactly one result per input node, in the same order. A node
	// whose instance does not exist gets Err == cloudprovider.InstanceNotFound
	// (per node, never for the whole batch). A returned error fails the whole
	// batch: throttling, a hung call or an open breaker is reported to every
	// caller; any other error makes cloudgate bisect the batch (at most
	// 2*ceil(log2(size)) more calls, stopping when both halves fail) so that a node
	// the cloud rejects fails alone.
	BatchInstanceStatus(ctx context.Context, nodes []*v1.Node) ([]InstanceStatus, error)
}

// InstanceStatus is the answer for one node of a BatchInstanceStatus call.
type InstanceStatus struct {
	// Metadata is the node's instance metadata; nil when Err is set.
	Metadata *cloudprovider.InstanceMetadata
	// Shutdown reports whether the instance is shut down (it still exists).
	Shutdown bool
	// Deleted reports that the instance no longer exists although the cloud
	// still describes it (an AWS instance in state "terminated"): the
	// upstream's InstanceExists answers false while its InstanceMetadata still
	// answers Metadata. The zero value keeps the original contract: a node
	// with Err == nil exists.
	Deleted bool
	// Err is this node's own error: cloudprovider.InstanceNotFound when the
	// instance does not exist, or any other per-node failure.
	Err error
	// MetadataErr, with Err nil and Metadata nil, is an instance that exists
	// but whose InstanceMetadata fails with it, while the upstream's
	// InstanceExists and InstanceShutdown answer (the GCE provider's, for an
	// instance without a network interface).
	MetadataErr error
}

// InstanceLister is an optional interface an upstream's InstancesV2
// implementation may satisfy to list all instances in pages. With list
// prefetch enabled, cloudgate refreshes its whole instance cache from it on a
// schedule, so steady-state per-node reads never reach the cloud.
type InstanceLister interface {
	// ListInstances returns one page of instances starting at pageToken
	// ("" for the first page) and the token of the next page ("" after the
	// last one).
	ListInstances(ctx context.Context, pageToken string) (page []InstanceRecord, nextPageToken string, err error)
}

// InstanceRecord is one instance as listed by InstanceLister.
type InstanceRecord struct {
	// NodeName is the name the instance's Node has (or will have) in the
	// cluster; used to answer nodes that do not have a provider ID yet.
	NodeName string
	// NameRank orders the live records of one list that carry one NodeName,
	// for clouds whose names are unique only within a scope (GCE: a zone):
	// the lowest answers by that name, as the upstream's own lookup by name
	// would find it (the GCE provider searches its managed zones in order),
	// whatever the records' order across pages. Two live records sharing the
	// lowest rank answer nothing by name (the upstream's own lookup answers
	// for that name: the AWS provider fails "multiple instances found").
	// Zero for a lister whose names are unique.
	NameRank int
	// Metadata carries the instance's metadata; Metadata.ProviderID must be set.
	Metadata cloudprovider.InstanceMetadata
	// Shutdown reports whether the instance is shut down.
	Shutdown bool
	// Deleted reports that the instance no longer exists although it is still
	// listed (see InstanceStatus.Deleted). A Deleted record answers reads by
	// its provider ID only, never by NodeName: a VM re-created under the same
	// name lists a live record and a Deleted one with one NodeName, and the
	// by-name answer (InstanceExists of a node without a provider ID) must be
	// the live one whatever the records' order.
	Deleted bool
}
