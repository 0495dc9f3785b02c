package simcloud

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/cloudgate/cloudgate/provider"
)

// Instance lookups shared by Instances, InstancesV2 and Zones. Each returns
// exactly cloudprovider.InstanceNotFound when the API says the instance
// does not exist; throttling and failures stay *APIError.

func (c *Cloud) instanceByID(ctx context.Context, zone, id string) (*instanceJSON, error) {
	var out instanceJSON
	if c.ids != nil {
		inst, err := c.ids.get(ctx, id)
		if err != nil {
			return nil, err
		}
		out = *inst
	} else {
		err := c.do(ctx, MethodGetInstance, http.MethodGet, "/v1/instances/"+url.PathEscape(id), nil, nil, &out)
		if isNotFound(err, CodeInstanceNotFound) {
			return nil, cloudprovider.InstanceNotFound
		}
		if err != nil {
			return nil, err
		}
	}
	if zone != "" && out.Zone != zone {
		// The provider ID names another zone: that instance does not exist.
		return nil, cloudprovider.InstanceNotFound
	}
	return &out, nil
}

func (c *Cloud) instanceByProviderID(ctx context.Context, providerID string) (*instanceJSON, error) {
	zone, id, err := ParseProviderID(providerID)
	if err != nil {
		return nil, err
	}
	return c.instanceByID(ctx, zone, id)
}

func (c *Cloud) instanceByName(ctx context.Context, name types.NodeName) (*instanceJSON, error) {
	if name == "" {
		return nil, errors.New("simcloud: empty node name")
	}
	var out instanceJSON
	err := c.do(ctx, MethodGetInstanceByName, http.MethodGet, "/v1/instances", url.Values{"name": {string(name)}}, nil, &out)
	if isNotFound(err, CodeInstanceNotFound) {
		return nil, cloudprovider.InstanceNotFound
	}
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// instanceForNode looks a node up by its provider ID when set, else by name.
func (c *Cloud) instanceForNode(ctx context.Context, node *v1.Node) (*instanceJSON, error) {
	if node == nil {
		return nil, errors.New("simcloud: nil node")
	}
	if node.Spec.ProviderID != "" {
		return c.instanceByProviderID(ctx, node.Spec.ProviderID)
	}
	return c.instanceByName(ctx, types.NodeName(node.Name))
}

func (j *instanceJSON) metadata() *cloudprovider.InstanceMetadata {
	return &cloudprovider.InstanceMetadata{
		ProviderID:    j.ProviderID,
		InstanceType:  j.Type,
		NodeAddresses: slices.Clone(j.Addresses),
		Zone:          j.Zone,
		Region:        j.Region,
	}
}

// instancesV2 implements cloudprovider.InstancesV2, provider.BatchInstances
// and provider.InstanceLister.
type instancesV2 struct{ c *Cloud }

var (
	_ cloudprovider.InstancesV2 = (*instancesV2)(nil)
	_ provider.BatchInstances   = (*instancesV2)(nil)
	_ provider.InstanceLister   = (*instancesV2)(nil)
)

// InstanceExists is false, nil for a missing or terminated instance.
func (v *instancesV2) InstanceExists(ctx context.Context, node *v1.Node) (bool, error) {
	inst, err := v.c.instanceForNode(ctx, node)
	if err == cloudprovider.InstanceNotFound {
		return false, nil
	}
	return err == nil && !inst.Terminated, err
}

// InstanceShutdown is false, cloudprovider.InstanceNotFound for a missing
// instance.
func (v *instancesV2) InstanceShutdown(ctx context.Context, node *v1.Node) (bool, error) {
	inst, err := v.c.instanceForNode(ctx, node)
	if err != nil {
		return false, err
	}
	return inst.Shutdown, nil
}

// InstanceMetadata is nil, cloudprovider.InstanceNotFound for a missing
// instance.
func (v *instancesV2) InstanceMetadata(ctx context.Context, node *v1.Node) (*cloudprovider.InstanceMetadata, error) {
	inst, err := v.c.instanceForNode(ctx, node)
	if err != nil {
		return nil, err
	}
	return inst.metadata(), nil
}

// MaxBatchSize implements provider.BatchInstances (ClientConfig.MaxBatchSize).
func (v *instancesV2) MaxBatchSize() int { return v.c.cfg.MaxBatchSize }

// BatchInstanceStatus implements provider.BatchInstances with one
// BatchGetInstances call: nodes with a provider ID are looked up by ID, the
// others by name. It does not split: more than the server's MaxBatchSize
// nodes is a 400 *APIError. A nil node or an invalid provider ID is that
// node's own error and is not sent.
func (v *instancesV2) BatchInstanceStatus(ctx context.Context, nodes []*v1.Node) ([]provider.InstanceStatus, error) {
	out := make([]provider.InstanceStatus, len(nodes))
	type ref struct {
		byID bool
		idx  int // index into req.IDs or req.Names; -1: not sent
		zone string
	}
	refs := make([]ref, len(nodes))
	var req batchGetRequest
	for i, n := range nodes {
		refs[i].idx = -1
		switch {
		case n == nil:
			out[i].Err = errors.New("simcloud: nil node")
		case n.Spec.ProviderID != "":
			zone, id, err := ParseProviderID(n.Spec.ProviderID)
			if err != nil {
				out[i].Err = err
				continue
			}
			refs[i] = ref{byID: true, idx: len(req.IDs), zone: zone}
			req.IDs = append(req.IDs, id)
		case n.Name == "":
			out[i].Err = errors.New("simcloud: node has neither a provider ID nor a name")
		default:
			refs[i] = ref{idx: len(req.Names)}
			req.Names = append(req.Names, n.Name)
		}
	}
	if len(req.IDs)+len(req.Names) == 0 {
		return out, nil
	}
	var resp batchGetResponse
	if err := v.c.do(ctx, MethodBatchGetInstances, http.MethodPost, "/v1/instances:batchGet", nil, req, &resp); err != nil {
		return nil, err
	}
	if len(resp.ByID) != len(req.IDs) || len(resp.ByName) != len(req.Names) {
		return nil, fmt.Errorf("simcloud: %s: answered %d+%d results for %d+%d items",
			MethodBatchGetInstances, len(resp.ByID), len(resp.ByName), len(req.IDs), len(req.Names))
	}
	for i, r := range refs {
		if r.idx < 0 {
			continue
		}
		var res batchResult
		if r.byID {
			res = resp.ByID[r.idx]
		} else {
			res = resp.ByName[r.idx]
		}
		if !res.Found || res.Instance == nil || (r.zone != "" && res.Instance.Zone != r.zone) {
			out[i].Err = cloudprovider.InstanceNotFound
			continue
		}
		out[i].Metadata = res.Instance.metadata()
		out[i].Shutdown = res.Instance.Shutdown
		out[i].Deleted = res.Instance.Terminated
	}
	return out, nil
}

// ListInstances implements provider.InstanceLister: one ListInstances call
// per page, in instance-ID order.
func (v *instancesV2) ListInstances(ctx context.Context, pageToken string) ([]provider.InstanceRecord, string, error) {
	return v.listPage(ctx, pageToken, true)
}

// listPage is one page of a walk: the adapter's list (ListInstances: the
// trailing page and ListAlive apply) or the provider's own listing of
// every instance (lbSnapshot: neither does).
func (v *instancesV2) listPage(ctx context.Context, pageToken string, adapter bool) ([]provider.InstanceRecord, string, error) {
	q := url.Values{}
	if pageToken != "" {
		q.Set("pageToken", pageToken)
	}
	if v.c.cfg.ListPageSize > 0 {
		q.Set("pageSize", fmt.Sprint(v.c.cfg.ListPageSize))
	}
	if pageToken == trailingPage {
		// After the last ID: the server answers an empty page.
		q.Set("pageToken", base64.RawURLEncoding.EncodeToString([]byte("~")))
	}
	if adapter && v.c.cfg.ListAlive {
		q.Set("state", "alive")
	}
	if adapter && pageToken == "" {
		v.c.beginWalk()
	}
	var resp listInstancesResponse
	if err := v.c.do(ctx, MethodListInstances, http.MethodGet, "/v1/instances", q, nil, &resp); err != nil {
		return nil, "", err
	}
	if resp.NextPageToken == "" && adapter && pageToken != trailingPage && v.c.trailingDue() {
		resp.NextPageToken = trailingPage
	}
	page := make([]provider.InstanceRecord, 0, len(resp.Instances))
	for i := range resp.Instances {
		j := &resp.Instances[i]
		rec := provider.InstanceRecord{NodeName: j.NodeName, Metadata: *j.metadata(), Shutdown: j.Shutdown, Deleted: j.Terminated}
		if j.Terminated {
			rec.NodeName = "" // name lookups skip a terminated instance
		}
		page = append(page, rec)
	}
	return page, resp.NextPageToken, nil
}

// instances implements cloudprovider.Instances (v1).
type instances struct{ c *Cloud }

var _ cloudprovider.Instances = (*instances)(nil)

func (v *instances) NodeAddresses(ctx context.Context, name types.NodeName) ([]v1.NodeAddress, error) {
	inst, err := v.c.instanceByName(ctx, name)
	if err != nil {
		return nil, err
	}
	return inst.Addresses, nil
}

func (v *instances) NodeAddressesByProviderID(ctx context.Context, providerID string) ([]v1.NodeAddress, error) {
	inst, err := v.c.instanceByProviderID(ctx, providerID)
	if err != nil {
		return nil, err
	}
	return inst.Addresses, nil
}

// InstanceID returns "<zone>/<id>": the part of the provider ID after
// "simcloud://", so that cloudprovider.GetInstanceProviderID builds
// exactly the instance's provider ID.
func (v *instances) InstanceID(ctx context.Context, nodeName types.NodeName) (string, error) {
	inst, err := v.c.instanceByName(ctx, nodeName)
	if err != nil {
		return "", err
	}
	return inst.Zone + "/" + inst.ID, nil
}

func (v *instances) InstanceType(ctx context.Context, name types.NodeName) (string, error) {
	inst, err := v.c.instanceByName(ctx, name)
	if err != nil {
		return "", err
	}
	return inst.Type, nil
}

func (v *instances) InstanceTypeByProviderID(ctx context.Context, providerID string) (string, error) {
	inst, err := v.c.instanceByProviderID(ctx, providerID)
	if err != nil {
		return "", err
	}
	return inst.Type, nil
}

// AddSSHKeyToAllInstances is cloudprovider.NotImplemented.
func (v *instances) AddSSHKeyToAllInstances(context.Context, string, []byte) error {
	return cloudprovider.NotImplemented
}

// CurrentNodeName returns the hostname as the node name; it makes no call.
func (v *instances) CurrentNodeName(_ context.Context, hostname string) (types.NodeName, error) {
	return types.NodeName(hostname), nil
}

// InstanceExistsByProviderID is false, nil for a missing or terminated
// instance.
func (v *instances) InstanceExistsByProviderID(ctx context.Context, providerID string) (bool, error) {
	inst, err := v.c.instanceByProviderID(ctx, providerID)
	if err == cloudprovider.InstanceNotFound {
		return false, nil
	}
	return err == nil && !inst.Terminated, err
}

// InstanceShutdownByProviderID is false, cloudprovider.InstanceNotFound for
// a missing instance.
func (v *instances) InstanceShutdownByProviderID(ctx context.Context, providerID string) (bool, error) {
	inst, err := v.c.instanceByProviderID(ctx, providerID)
	if err != nil {
		return false, err
	}
	return inst.Shutdown, nil
}

// zones implements cloudprovider.Zones.
type zones struct{ c *Cloud }

var _ cloudprovider.Zones = (*zones)(nil)

// GetZone is cloudprovider.NotImplemented: it describes the machine the
// caller runs on, which is never a simulated instance.
func (z *zones) GetZone(context.Context) (cloudprovider.Zone, error) {
	return cloudprovider.Zone{}, cloudprovider.NotImplemented
}

func (z *zones) GetZoneByProviderID(ctx context.Context, providerID string) (cloudprovider.Zone, error) {
	inst, err := z.c.instanceByProviderID(ctx, providerID)
	if err != nil {
		return cloudprovider.Zone{}, err
	}
	return cloudprovider.Zone{FailureDomain: inst.Zone, Region: inst.Region}, nil
}

func (z *zones) GetZoneByNodeName(ctx context.Context, nodeName types.NodeName) (cloudprovider.Zone, error) {
	inst, err := z.c.instanceByName(ctx, nodeName)
	if err != nil {
		return cloudprovider.Zone{}, err
	}
	return cloudprovider.Zone{FailureDomain: inst.Zone, Region: inst.Region}, nil
}

// trailingPage is the page token of ListTrailingPage's last request.
const trailingPage = "trailing"

// walkState is the adapter's list walks: how many have begun, and whether
// the current one ends with the trailing page (ClientConfig.ListTrailingEvery).
type walkState struct {
	mu       sync.Mutex
	walks    int
	trailing bool
}

// beginWalk starts a ListInstances walk and decides whether it ends with
// the trailing page.
func (c *Cloud) beginWalk() {
	c.walk.mu.Lock()
	defer c.walk.mu.Unlock()
	every := max(c.cfg.ListTrailingEvery, 1)
	c.walk.trailing = c.cfg.ListTrailingPage && c.walk.walks%every == 0
	c.walk.walks++
}

func (c *Cloud) trailingDue() bool {
	c.walk.mu.Lock()
	defer c.walk.mu.Unlock()
	return c.walk.trailing
}
