// Command cloudgate-config checks a cloudgate.yaml the way the cloud-controller-manager will
// load it, before a rollout: it exits non-zero with the error naming the field and the fix, or
// prints the effective configuration — every default and derived value filled in, by the same
// provider.Config.Resolve the CCM runs, the upstream's inline config redacted (it may hold
// credentials) — so a reviewer sees what cloudgate will do with the file.
//
//	cloudgate-config cloudgate.yaml        # or - for standard input
//	cloudgate-config -defaults             # the defaults alone (provider.DefaultConfig)
//	cloudgate-config -upstreams aws,mycloud cloudgate.yaml
//
// The upstream: upstream.name is required and upstream.configFile is read, as the CCM does at
// start-up (so run the tool where that path resolves as in the CCM's pod). This binary does not
// link the upstream providers, so it checks upstream.name against -upstreams, the providers
// registered in the CCM binary that will run the file; the default lists those of cloudgate's own
// CCM binaries (package cmd/ccm/upstreams). For a CCM binary of your own, pass its providers. What it cannot
// check is the upstream's own configuration: the provider reads that when the CCM builds it.
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

	"github.com/cloudgate/cloudgate/cmd/ccm/upstreams"
	"github.com/cloudgate/cloudgate/provider"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("cloudgate-config", flag.ContinueOnError)
	fs.SetOutput(stderr)
	defaults := fs.Bool("defaults", false, "print the defaults (provider.DefaultConfig) and exit")
	upstreams := fs.String("upstreams", strings.Join(upstreams.Known, ","),
		"comma-separated providers registered in the CCM binary that will run the file (upstream.name must be one)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: cloudgate-config [-defaults] [-upstreams a,b] [cloudgate.yaml | -]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var cfg *provider.Config
	var err error
	switch {
	case *defaults && fs.NArg() == 0:
		// The defaults name no upstream: resolved as provider.New resolves a Config.
		if cfg, err = provider.DefaultConfig().Resolve(provider.ResolveOptions{}); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
	case !*defaults && fs.NArg() == 1:
		if cfg, err = load(fs.Arg(0), stdin, strings.Split(*upstreams, ",")); err != nil {
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
	fmt.Fprint(stdout, "# effective cloudgate configuration (defaults and derived values filled in)\n", string(out), derived(cfg))
	return 0
}

// derived lists, as YAML comments, each read method's TTL (provider.Config.TTLs, as the gate
// reads them), so the printout shows every figure cloudgate will run with; the values a zero
// field stands for are in the configuration itself (Resolve fills them in).
func derived(cfg *provider.Config) string {
	ttls := cfg.TTLs()
	var b strings.Builder
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

// load reads and resolves the file as the CCM's registered factory does, with the upstream
// checked against upstreams.
func load(path string, stdin io.Reader, upstreams []string) (*provider.Config, error) {
	r := stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("cloudgate-config: %s does not exist: name the file the CCM's --cloud-config points at", path)
			}
			return nil, fmt.Errorf("cloudgate-config: %w", err)
		}
		defer f.Close()
		r = f
	}
	cfg, err := provider.DecodeConfig(r)
	if err != nil {
		return nil, err
	}
	return cfg.Resolve(provider.ResolveOptions{BuildUpstream: true, Upstreams: upstreams})
}
