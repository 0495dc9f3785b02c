package provider

import (
	"encoding/json"

	"k8s.io/klog/v2"
)

// redactedMark replaces a secret in the start-up log line.
const redactedMark = "REDACTED"

// logEffectiveConfig writes one start-up line with the effective
// configuration, cfg as Config.Resolve returned it (defaults and derived
// values filled in: what runs). The upstream's inline config may hold
// credentials and is replaced by redactedMark; Redis passwords are never in
// the config (only the paths of the files holding them), so they cannot
// appear either.
func logEffectiveConfig(cfg *Config) {
	c := *cfg
	if c.Upstream.Config != "" {
		c.Upstream.Config = redactedMark
	}
	b, err := json.Marshal(&c)
	if err != nil { // not expected: Config is plain data
		klog.ErrorS(err, "cloudgate: cannot render the effective configuration")
		return
	}
	klog.InfoS("cloudgate: effective configuration", "upstream", c.Upstream.Name, "config", string(b))
}
