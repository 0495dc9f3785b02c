package awsbatch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"gopkg.in/gcfg.v1"
	awsv1 "k8s.io/cloud-provider-aws/pkg/providers/v1"
	"k8s.io/cloud-provider-aws/pkg/providers/v1/config"
	"k8s.io/cloud-provider-aws/pkg/services"
)

// settings is what the adapter takes from the AWS provider's cloud config.
type settings struct {
	cfg       config.CloudConfig
	clusterID string
	// legacy is true when the cluster is named by the legacy
	// KubernetesCluster tag ([Global] KubernetesClusterTag).
	legacy   bool
	families []string
}

// parseConfig reads the AWS provider's cloud config (the same gcfg file
// --cloud-config gives "aws") and checks what the adapter needs. Errors
// name the field to fix; the file may hold a role ARN, never credentials,
// but errors still do not quote it.
func parseConfig(data []byte) (*settings, error) {
	s := &settings{}
	if len(data) > 0 {
		if err := gcfg.FatalOnly(gcfg.ReadInto(&s.cfg, bytes.NewReader(data))); err != nil {
			return nil, fmt.Errorf("aws cloud config: %w", err)
		}
	}
	if err := s.cfg.ValidateOverrides(); err != nil {
		return nil, fmt.Errorf("aws cloud config: [ServiceOverride]: %w", err)
	}
	g := s.cfg.Global
	switch {
	case g.KubernetesClusterTag != "" && g.KubernetesClusterID != "" && g.KubernetesClusterTag != g.KubernetesClusterID:
		return nil, fmt.Errorf("aws cloud config: [Global] KubernetesClusterTag %q and KubernetesClusterID %q differ: set one", g.KubernetesClusterTag, g.KubernetesClusterID)
	case g.KubernetesClusterTag != "":
		s.clusterID, s.legacy = g.KubernetesClusterTag, true
	case g.KubernetesClusterID != "":
		s.clusterID = g.KubernetesClusterID
	default:
		return nil, errors.New("aws cloud config: [Global] KubernetesClusterID is required by the " + Name +
			" adapter (it lists the cluster's instances by the kubernetes.io/cluster/<id> tag): set it to the cluster's ID")
	}
	s.families = g.NodeIPFamilies
	if len(s.families) == 0 {
		s.families = []string{"ipv4"} // the provider's default
	}
	for _, f := range s.families {
		if f != "ipv4" && f != "ipv6" {
			return nil, fmt.Errorf("aws cloud config: [Global] NodeIPFamilies: %q is not ipv4 or ipv6", f)
		}
	}
	if g.Zone != "" {
		if _, err := azToRegion(g.Zone); err != nil {
			return nil, fmt.Errorf("aws cloud config: [Global] Zone: %w", err)
		}
	}
	return s, nil
}

var regionOfZone = regexp.MustCompile(`^([a-zA-Z]+-)+\d+`)

// azToRegion is the provider's own derivation of a Region from a zone name.
func azToRegion(az string) (string, error) {
	region := regionOfZone.FindString(az)
	if region == "" {
		return "", fmt.Errorf("invalid availability zone %q (want e.g. us-east-1a)", az)
	}
	return region, nil
}

// region resolves the Region as the provider does: [Global] Zone, then
// [Global] Region, then the instance-metadata service.
func (s *settings) region(ctx context.Context) (string, error) {
	if s.cfg.Global.Zone != "" {
		return azToRegion(s.cfg.Global.Zone)
	}
	if s.cfg.Global.Region != "" {
		return s.cfg.Global.Region, nil
	}
	c, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return "", fmt.Errorf("aws: loading SDK config for the metadata client: %w", err)
	}
	md := imds.NewFromConfig(c, s.cfg.GetIMDSEndpointOpts()...)
	r, err := s.cfg.GetRegion(ctx, md)
	if err != nil {
		return "", fmt.Errorf("aws: no [Global] Zone or Region in the cloud config and the instance-metadata service did not answer: %w", err)
	}
	return r, nil
}

// newEC2Client builds an EC2 client as the provider's Compute does: the
// SDK's default credential chain (environment, shared files, web identity,
// instance role) or the configured role, the Region, the provider's
// [ServiceOverride] endpoint resolver and signing options, and the SDK's
// standard retryer (which retries RequestLimitExceeded and HTTP 503).
func (s *settings) newEC2Client(ctx context.Context, region string) (*ec2.Client, error) {
	c, err := awsconfig.LoadDefaultConfig(ctx,
		awsconfig.WithDefaultsMode(aws.DefaultsModeInRegion),
		awsconfig.WithRegion(region))
	if err != nil {
		return nil, fmt.Errorf("aws: loading SDK config: %w", err)
	}
	if arn := s.cfg.Global.RoleARN; arn != "" {
		sts, err := services.NewStsClient(ctx, region, arn, s.cfg.Global.SourceARN)
		if err != nil {
			return nil, fmt.Errorf("aws: [Global] RoleARN: creating the STS client: %w", err)
		}
		c.Credentials = aws.NewCredentialsCache(stscreds.NewAssumeRoleProvider(sts, arn))
	}
	opts := s.cfg.GetEC2EndpointOpts(region)
	opts = append(opts, func(o *ec2.Options) {
		o.Retryer = retry.NewStandard()
		o.EndpointResolverV2 = s.cfg.GetCustomEC2Resolver()
	})
	return ec2.NewFromConfig(c, opts...), nil
}

// ProviderIDPrefix is what every AWS provider ID starts with.
const ProviderIDPrefix = awsv1.ProviderName + "://"
