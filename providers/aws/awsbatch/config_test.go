package awsbatch

import (
	"strings"
	"testing"
)

func TestParseConfigErrorsNameTheField(t *testing.T) {
	tests := []struct {
		name, config, want string
	}{
		{"no cluster ID", "[Global]\nZone = us-east-1a\n", "KubernetesClusterID"},
		{"tag and ID differ", "[Global]\nKubernetesClusterTag = a\nKubernetesClusterID = b\n", "differ"},
		{"bad family", "[Global]\nKubernetesClusterID = c\nNodeIPFamilies = ipv5\n", "NodeIPFamilies"},
		{"bad zone", "[Global]\nKubernetesClusterID = c\nZone = nowhere\n", "Zone"},
		{"override without URL", "[Global]\nKubernetesClusterID = c\n[ServiceOverride \"1\"]\nService = EC2\nRegion = us-east-1\nSigningRegion = us-east-1\n", "ServiceOverride"},
		{"not gcfg", "[Global\n", "aws cloud config"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseConfig([]byte(tt.config))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one naming %q", err, tt.want)
			}
		})
	}
	s, err := parseConfig([]byte("[Global]\nZone = eu-west-3b\nKubernetesClusterTag = old\n"))
	if err != nil || s.clusterID != "old" || !s.legacy || s.families[0] != "ipv4" {
		t.Fatalf("legacy tag: %+v, %v", s, err)
	}
	if r, _ := azToRegion("eu-west-3b"); r != "eu-west-3" {
		t.Fatalf("azToRegion = %q", r)
	}
}

func TestPageTokens(t *testing.T) {
	for _, tc := range []struct {
		phase int
		tok   string
	}{{0, ""}, {0, "abc"}, {1, ""}, {1, "x:y"}} {
		p, tok, err := decodeToken(encodeToken(tc.phase, tc.tok))
		if err != nil || p != tc.phase || tok != tc.tok {
			t.Errorf("round trip (%d, %q) = (%d, %q, %v)", tc.phase, tc.tok, p, tok, err)
		}
	}
	if _, _, err := decodeToken("garbage!"); err == nil {
		t.Error("a foreign token was accepted")
	}
}
