package ec2sim

import (
	"context"
	"errors"
	"maps"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
)

// TestTags drives CreateTags and DeleteTags through the real SDK client and checks the
// instance's tags (and DescribeInstances' tag filter) after each step.
func TestTags(t *testing.T) {
	s := start(t, Config{Region: "us-east-1"})
	original := map[string]string{"kubernetes.io/cluster/c": "owned"}
	s.Put(Instance{ID: id(1), Zone: "us-east-1a", Tags: original},
		Instance{ID: id(2), Zone: "us-east-1a"})
	c := client(t, s, 1)
	ctx := context.Background()
	tag := func(k string, v *string) ec2types.Tag { return ec2types.Tag{Key: aws.String(k), Value: v} }

	for _, step := range []struct {
		name    string
		call    func() error
		wantErr string
		want1   map[string]string // id(1)'s tags after the step
		want2   map[string]string
	}{
		{"create on two instances", func() error {
			_, err := c.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{id(1), id(2)},
				Tags: []ec2types.Tag{tag("team", aws.String("a")), tag("env", aws.String("prod"))}})
			return err
		}, "", map[string]string{"kubernetes.io/cluster/c": "owned", "team": "a", "env": "prod"}, map[string]string{"team": "a", "env": "prod"}},
		{"create overwrites", func() error {
			_, err := c.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{id(1)}, Tags: []ec2types.Tag{tag("team", aws.String("b"))}})
			return err
		}, "", map[string]string{"kubernetes.io/cluster/c": "owned", "team": "b", "env": "prod"}, map[string]string{"team": "a", "env": "prod"}},
		{"an unknown instance changes nothing", func() error {
			_, err := c.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{id(2), id(9)}, Tags: []ec2types.Tag{tag("x", aws.String("y"))}})
			return err
		}, "InvalidInstanceID.NotFound", map[string]string{"kubernetes.io/cluster/c": "owned", "team": "b", "env": "prod"}, map[string]string{"team": "a", "env": "prod"}},
		{"reserved key", func() error {
			_, err := c.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{id(2)}, Tags: []ec2types.Tag{tag("aws:x", aws.String("y"))}})
			return err
		}, "InvalidParameterValue", map[string]string{"kubernetes.io/cluster/c": "owned", "team": "b", "env": "prod"}, map[string]string{"team": "a", "env": "prod"}},
		{"delete with a value that differs keeps the tag", func() error {
			_, err := c.DeleteTags(ctx, &ec2.DeleteTagsInput{Resources: []string{id(1)}, Tags: []ec2types.Tag{tag("team", aws.String("a"))}})
			return err
		}, "", map[string]string{"kubernetes.io/cluster/c": "owned", "team": "b", "env": "prod"}, map[string]string{"team": "a", "env": "prod"}},
		{"delete with the value, and without one", func() error {
			_, err := c.DeleteTags(ctx, &ec2.DeleteTagsInput{Resources: []string{id(1), id(2)}, Tags: []ec2types.Tag{tag("team", aws.String("b")), tag("env", nil)}})
			return err
		}, "", map[string]string{"kubernetes.io/cluster/c": "owned"}, map[string]string{"team": "a"}},
		{"delete without tags deletes all", func() error {
			_, err := c.DeleteTags(ctx, &ec2.DeleteTagsInput{Resources: []string{id(2)}})
			return err
		}, "", map[string]string{"kubernetes.io/cluster/c": "owned"}, map[string]string{}},
		{"delete on an unknown instance", func() error {
			_, err := c.DeleteTags(ctx, &ec2.DeleteTagsInput{Resources: []string{id(9)}})
			return err
		}, "InvalidInstanceID.NotFound", map[string]string{"kubernetes.io/cluster/c": "owned"}, map[string]string{}},
	} {
		err := step.call()
		var ae smithy.APIError
		switch {
		case step.wantErr == "" && err != nil:
			t.Fatalf("%s: %v", step.name, err)
		case step.wantErr != "" && (!errors.As(err, &ae) || ae.ErrorCode() != step.wantErr):
			t.Fatalf("%s: error %v, want %s", step.name, err, step.wantErr)
		}
		for i, want := range []map[string]string{step.want1, step.want2} {
			got, ok := s.Tags(id(i + 1))
			if !ok || !maps.Equal(got, want) {
				t.Fatalf("%s: %s tags %v, want %v", step.name, id(i+1), got, want)
			}
		}
	}
	if !maps.Equal(original, map[string]string{"kubernetes.io/cluster/c": "owned"}) {
		t.Errorf("the map given to Put changed: %v", original)
	}
	if _, ok := s.Tags(id(9)); ok {
		t.Error("Tags of an unknown instance: ok")
	}
	// DescribeInstances sees the tags.
	out, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{{Name: aws.String("tag:kubernetes.io/cluster/c"), Values: []string{"owned"}}}})
	if err != nil || len(out.Reservations) != 1 || *out.Reservations[0].Instances[0].InstanceId != id(1) {
		t.Fatalf("DescribeInstances by tag: %+v, %v", out, err)
	}
	if st := s.Stats("CreateTags"); st.Requests != 4 || st.Errors != 2 || st.Items != 3 {
		t.Errorf("CreateTags stats %+v, want 4 requests, 2 errors, 3 instances", st)
	}
}
