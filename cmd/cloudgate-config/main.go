// Command cloudgate-config checks a cloudgate.yaml the way the cloud-controller-manager will
// load it, before a rollout: it exits non-zero with the error naming the field and the fix, or
// prints the effective configuration — every default filled in, the upstream's inline config
// redacted (it may hold credentials) — so a reviewer sees what cloudgate will do with the file.
//
//	cloudgate-config cloudgate.yaml        # or - for standard input
//	cloudgate-config -defaults             # the defaults alone (provider.DefaultConfig)
//
// It cannot tell whether the upstream named in the file is registered in your CCM binary: the
// CCM itself refuses to start if it is not.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/cloudgate/cloudgate/provider"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("cloudgate-config", flag.ContinueOnError)
	fs.SetOutput(stderr)
	defaults := fs.Bool("defaults", false, "print the defaults (provider.DefaultConfig) and exit")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: cloudgate-config [-defaults] [cloudgate.yaml | -]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var cfg *provider.Config
	switch {
	case *defaults && fs.NArg() == 0:
		cfg = provider.DefaultConfig()
		cfg.Default()
	case !*defaults && fs.NArg() == 1:
		var err error
		if cfg, err = load(fs.Arg(0), stdin); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
	default:
		fs.Usage()
		return 2
	}
	if cfg.Upstream.Config != "" {
		cfg.Upstream.Config = fmt.Sprintf("<redacted: %d bytes>", len(cfg.Upstream.Config))
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		fmt.Fprintln(stderr, "cloudgate-config:", err)
		return 1
	}
	fmt.Fprint(stdout, "# effective cloudgate configuration (defaults filled in)\n", string(out), derived(cfg))
	return 0
}

// derived lists, as YAML comments, what a zero field means and each read method's TTL, so the
// printout shows every figure cloudgate will run with.
func derived(cfg *provider.Config) string {
	ttls := provider.DefaultTTLs()
	for m, mc := range cfg.Methods {
		if mc.TTL != nil {
			ttls[m] = mc.TTL.Duration
		}
	}
	var b strings.Builder
	b.WriteString("# derived from the settings above:\n")
	if cfg.Batch.ListInterval.Duration == 0 {
		fmt.Fprintf(&b, "#   batch.listInterval: %v (0: half the InstanceMetadata TTL)\n", ttls["InstanceMetadata"]/2)
	}
	if cfg.Breaker.MinOpenTimeout.Duration == 0 {
		fmt.Fprintf(&b, "#   breaker.minOpenTimeout: %v (0: openTimeout/30)\n", cfg.Breaker.OpenTimeout.Duration/30)
	}
	b.WriteString("# read methods' TTLs (0: not cached; methods.<name>.ttl overrides):\n")
	names := make([]string, 0, len(ttls))
	for m := range ttls {
		names = append(names, m)
	}
	sort.Strings(names)
	for _, m := range names {
		fmt.Fprintf(&b, "#   %s: %v\n", m, ttls[m])
	}
	return b.String()
}

func load(path string, stdin io.Reader) (*provider.Config, error) {
	if path == "-" {
		return provider.LoadConfig(stdin)
	}
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("cloudgate-config: %s does not exist: name the file the CCM's --cloud-config points at", path)
		}
		return nil, fmt.Errorf("cloudgate-config: %w", err)
	}
	defer f.Close()
	return provider.LoadConfig(f)
}
