package fleet

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Defaults of the optional Config fields.
const (
	DefaultWeight        = 1.0
	DefaultMinShare      = 0.1
	DefaultCriticalShare = 0.2
	// DefaultRedisTimeout is tens of milliseconds: a Redis round trip on a
	// loaded node regularly takes a few ms, and one slow call does not
	// switch modes anyway (see FallbackAfter).
	DefaultRedisTimeout  = 50 * time.Millisecond
	DefaultFallbackAfter = 3
	DefaultHeartbeat     = time.Second
	DefaultRecovery      = 30 * time.Second
	// DefaultForgetAfterHeartbeats is forgetAfter's default in heartbeats
	// (10m at the default heartbeat): member ids are stable per cluster and
	// a clean shutdown deregisters, so a silent member is nearly always a
	// cluster cut from Redis (hold its claim) rather than a dead one; see
	// docs/fleet.md.
	DefaultForgetAfterHeartbeats = 600
)

// Failure modes (limits.shared.failureMode): what a member cut from Redis
// for longer than the others keep its claim does.
const (
	// FailureOpen: it keeps serving a floor (the smaller of its claim and
	// its fair share at the last member count) until Redis answers; the
	// cloud's own throttling, absorbed by AIMD, is the backstop. Default.
	FailureOpen = "open"
	// FailureClosed: it admits nothing until Redis answers, so the fleet
	// never exceeds the quota by it (the behaviour before failureMode).
	FailureClosed = "closed"
)

// Config is the YAML section limits.shared of cloudgate.yaml: the account
// whose quota this cloudgate shares with the rest of the fleet, and the Redis
// that keeps the shared budget. Field names in errors are the YAML paths.
type Config struct {
	// Redis is where the fleet's budget lives.
	Redis RedisConfig `json:"redis"`
	// Account names the quota: every cloudgate (and every tool going
	// through one) with the same account shares it. E.g. "aws-123456789012-eu-west-1".
	Account string `json:"account"`
	// Weight is this member's relative share of the quota when it has to
	// fall back to a local limit (> 0; default 1).
	Weight float64 `json:"weight,omitempty"`
	// MinShare is the fraction of the quota this member may use in fallback
	// when it has never seen the fleet's membership (in (0, 1]; default
	// 0.1). Set it to at most 1 / the number of members.
	MinShare float64 `json:"minShare,omitempty"`
	// CriticalShare is the fraction of the quota reserved for critical calls
	// (writes, node initialisation): the other calls may use only
	// 1 - CriticalShare of it. In [0, 1); nil means 0.2.
	CriticalShare *float64 `json:"criticalShare,omitempty"`
	// BackgroundShare caps the fraction of the quota that background calls
	// (status refreshes, list sweeps) of all members together may use, so
	// that they yield fleet-wide to normal and critical calls. In (0, 1];
	// nil means no cap beyond 1 - CriticalShare.
	BackgroundShare *float64 `json:"backgroundShare,omitempty"`
	// RedisTimeout bounds every Redis call. A call that fails or times out is
	// served from this member's local share at once (never blocking a
	// controller for longer); the member switches to fallback only after
	// FallbackAfter consecutive failures. Default 50ms.
	RedisTimeout Duration `json:"redisTimeout,omitzero"`
	// FallbackAfter is how many consecutive failed Redis calls switch the
	// member to its local share (1-100; default 3). A success resets the
	// count; a heartbeat that reaches Redis rejoins.
	FallbackAfter int `json:"fallbackAfter,omitempty"`
	// FailureMode is what a member cut from Redis does once the others may
	// have forgotten it (ForgetAfter less three heartbeats after its last
	// answered heartbeat): "open" (default) keeps serving its floor, the
	// smaller of its claim and weight / Σ weights at the last membership
	// read; "closed" admits nothing until Redis answers.
	FailureMode string `json:"failureMode,omitempty"`
	// MaxMembers, when set, is the most members the fleet has: the live
	// members hold back MinShare of the quota for every member of it not
	// registered in Redis, so a member that never reached Redis (and serves
	// MinShare) is accounted for; MinShare is then at most 1 / MaxMembers.
	// 0: only registered members are counted.
	MaxMembers int `json:"maxMembers,omitempty"`
	// Heartbeat is how often the member renews its registration and, in
	// fallback, probes Redis (10ms-1m; default 1s). A member silent for 3
	// heartbeats counts as fallen: the others reserve its static share.
	// Every member of a fleet should use the same heartbeat.
	Heartbeat Duration `json:"heartbeat,omitzero"`
	// ForgetAfter is how long the others keep a silent member registered
	// and its claim held back from their budget, and so how long a member
	// cut from Redis may serve its claim (ForgetAfter less three
	// heartbeats after its last answered heartbeat; then it admits nothing
	// until Redis answers). Longer keeps a member serving through a longer
	// Redis outage, at the price of holding a dead member's claim as long.
	// Each member's own value decides when it is forgotten. Between 10
	// heartbeats and 24h; default 600 heartbeats (10m).
	ForgetAfter Duration `json:"forgetAfter,omitzero"`
	// Recovery is how long the fleet's rate takes to grow back linearly
	// from 0 to the quota after a throttling answer cut it (10ms-1h; default
	// 30s, as a local bucket's qps/30 per second). Successive cuts are at
	// least Recovery/30 apart.
	Recovery Duration `json:"recovery,omitzero"`
}

// RedisConfig is limits.shared.redis: one Redis (address), a Redis Cluster
// (addresses, some of its nodes) or a Redis under Sentinel (masterName and
// the Sentinels' addresses), through go-redis's UniversalClient.
type RedisConfig struct {
	// Address is host:port of a single Redis.
	Address string `json:"address,omitempty"`
	// Addresses are host:port of Redis Cluster nodes, or, with MasterName,
	// of the Sentinels. Exclusive with Address.
	Addresses []string `json:"addresses,omitempty"`
	// MasterName is the master's name the Sentinels monitor; it selects
	// Sentinel mode.
	MasterName string `json:"masterName,omitempty"`
	// SentinelPasswordFile holds the Sentinels' own password (requirepass
	// of the Sentinels); empty means none.
	SentinelPasswordFile string `json:"sentinelPasswordFile,omitempty"`
	// Username is the Redis ACL user; empty means the default user.
	Username string `json:"username,omitempty"`
	// PasswordFile is a file holding the password (surrounding whitespace is
	// ignored); empty means no password. The password is never logged.
	PasswordFile string `json:"passwordFile,omitempty"`
	// TLS, when enabled, connects with TLS.
	TLS TLSConfig `json:"tls,omitzero"`
}

// TLSConfig is limits.shared.redis.tls.
type TLSConfig struct {
	Enabled bool `json:"enabled,omitempty"`
	// CAFile is a PEM bundle of the CAs that sign the server's certificate;
	// empty means the system roots.
	CAFile string `json:"caFile,omitempty"`
	// ServerName overrides the name checked in the server's certificate;
	// empty means the host of Address.
	ServerName string `json:"serverName,omitempty"`
}

// Duration is a time.Duration written as a Go duration string such as "5ms"
// in YAML and JSON, as Kubernetes' metav1.Duration is (the same files load),
// defined here so that the limiter depends on nothing of Kubernetes.
type Duration struct {
	time.Duration
}

// MarshalJSON writes d as a duration string ("1m30s").
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(d.Duration.String())
}

// UnmarshalJSON reads a duration string ("30s", "5m"); a number or another
// kind of value is an error, as for metav1.Duration, so that "30" is not
// read as 30 nanoseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want a duration string such as \"30s\" or \"5m\", got %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want a duration string such as \"30s\" or \"5m\": %w", err)
	}
	d.Duration = v
	return nil
}

// redactAddr replaces the userinfo of an address (everything before its
// last '@', after a scheme) by REDACTED.
func redactAddr(a string) string {
	i := strings.LastIndex(a, "@")
	if i < 0 {
		return a
	}
	prefix := ""
	if j := strings.Index(a, "://"); j >= 0 && j < i {
		prefix = a[:j+3]
	}
	return prefix + "REDACTED@" + a[i+1:]
}

// accountRE: the account is part of Redis keys and of log lines.
var accountRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/@-]{0,127}$`)

// Validate reports every invalid field, naming it by its YAML path
// (limits.shared.…) and saying what would fix it. It reads no file.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	const p = "limits.shared."
	checkAddr := func(field, a string) {
		if strings.Contains(a, "@") {
			// A URL with credentials (redis://user:PASSWORD@host:port): never
			// quote it, the password would reach the CCM's exit log.
			bad(p+"%s must be host:port (got %q, credentials removed): put the password in redis.passwordFile and the user in redis.username", field, redactAddr(a))
			return
		}
		if host, port, err := net.SplitHostPort(a); err != nil || host == "" {
			bad(p+"%s must be host:port (got %q)", field, a)
		} else if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			bad(p+"%s: port must be 1-65535 (got %q)", field, port)
		}
	}
	switch r := c.Redis; {
	case r.Address == "" && len(r.Addresses) == 0:
		bad(p + "redis.address is required: host:port of the Redis that keeps the fleet's budget (or redis.addresses for a Redis Cluster, or with redis.masterName for Sentinels)")
	case r.Address != "" && len(r.Addresses) > 0:
		bad(p + "redis.address and redis.addresses exclude each other: address names one Redis, addresses the Cluster nodes or the Sentinels")
	case r.Address != "":
		checkAddr("redis.address", r.Address)
		if r.MasterName != "" {
			bad(p + "redis.masterName needs redis.addresses, the Sentinels' host:port (not redis.address)")
		}
	default:
		for i, a := range r.Addresses {
			checkAddr(fmt.Sprintf("redis.addresses[%d]", i), a)
		}
	}
	if c.Redis.MasterName != "" && strings.ContainsAny(c.Redis.MasterName, " \t\r\n") {
		bad(p + "redis.masterName must not contain whitespace")
	}
	if c.Redis.SentinelPasswordFile != "" && c.Redis.MasterName == "" {
		bad(p + "redis.sentinelPasswordFile needs redis.masterName (Sentinel mode)")
	}
	if strings.ContainsAny(c.Redis.Username, " \t\r\n") {
		bad(p + "redis.username must not contain whitespace")
	}
	if !c.Redis.TLS.Enabled && (c.Redis.TLS.CAFile != "" || c.Redis.TLS.ServerName != "") {
		bad(p + "redis.tls: caFile and serverName need enabled: true")
	}
	switch {
	case c.Account == "":
		bad(p + "account is required: name the cloud account whose quota the fleet shares (the same in every member)")
	case !accountRE.MatchString(c.Account):
		bad(p+"account %q: use 1-128 letters, digits and . _ : / @ - (starting with a letter or digit)", c.Account)
	}
	if math.IsNaN(c.Weight) || math.IsInf(c.Weight, 0) || c.Weight < 0 {
		bad(p+"weight must be > 0 (got %v; 0 means %v)", c.Weight, DefaultWeight)
	}
	if math.IsNaN(c.MinShare) || c.MinShare < 0 || c.MinShare > 1 {
		bad(p+"minShare must be in (0, 1], a fraction of the quota (got %v; 0 means %v)", c.MinShare, DefaultMinShare)
	}
	if cs := c.CriticalShare; cs != nil && (math.IsNaN(*cs) || *cs < 0 || *cs >= 1) {
		bad(p+"criticalShare must be in [0, 1), the fraction of the quota reserved for critical calls (got %v)", *cs)
	}
	if bs := c.BackgroundShare; bs != nil && (math.IsNaN(*bs) || *bs <= 0 || *bs > 1) {
		bad(p+"backgroundShare must be in (0, 1], the fraction of the quota background calls may use fleet-wide (got %v; leave it out for no cap)", *bs)
	}
	switch c.FailureMode {
	case "", FailureOpen, FailureClosed:
	default:
		bad(p+"failureMode must be %q or %q (got %q; leave it out for %q)", FailureOpen, FailureClosed, c.FailureMode, FailureOpen)
	}
	if c.MaxMembers < 0 || c.MaxMembers > 10000 {
		bad(p+"maxMembers must be between 1 and 10000, the most cloudgates sharing the account (got %d; leave it out to count only the registered members)", c.MaxMembers)
	}
	if c.FallbackAfter < 0 || c.FallbackAfter > 100 {
		bad(p+"fallbackAfter must be between 1 and 100 consecutive failed Redis calls (got %d; 0 means %d)", c.FallbackAfter, DefaultFallbackAfter)
	}
	if d := c.Heartbeat.Duration; d != 0 && (d < 10*time.Millisecond || d > time.Minute) {
		bad(p+"heartbeat must be between 10ms and 1m (got %v; leave it out for %v)", d, DefaultHeartbeat)
	}
	if d := c.ForgetAfter.Duration; d != 0 {
		hb := c.Heartbeat.Duration
		if hb == 0 {
			hb = DefaultHeartbeat
		}
		if d < 10*hb || d > 24*time.Hour {
			bad(p+"forgetAfter must be between 10 heartbeats (%v) and 24h (got %v; leave it out for %d heartbeats)", 10*hb, d, DefaultForgetAfterHeartbeats)
		}
	}
	if d := c.Recovery.Duration; d != 0 && (d < time.Second/100 || d > time.Hour) {
		bad(p+"recovery must be between 10ms and 1h (got %v; leave it out for %v)", d, DefaultRecovery)
	}
	if d := c.RedisTimeout.Duration; d < 0 || d > 10*time.Second {
		bad(p+"redisTimeout must be between 0 and 10s, tens of milliseconds in practice (got %v; 0 means %v)", d, DefaultRedisTimeout)
	}
	return errors.Join(errs...)
}

// withDefaults fills the zero-valued optional fields.
func (c Config) withDefaults() Config {
	if c.Weight == 0 {
		c.Weight = DefaultWeight
	}
	if c.MinShare == 0 {
		c.MinShare = DefaultMinShare
	}
	if c.MaxMembers > 0 {
		// A member that never reached Redis serves at most its fair share
		// at the most members, so what the others hold for the unregistered
		// ones never takes the whole quota.
		c.MinShare = min(c.MinShare, 1/float64(c.MaxMembers))
	}
	if c.CriticalShare == nil {
		cs := DefaultCriticalShare
		c.CriticalShare = &cs
	}
	if c.RedisTimeout.Duration == 0 {
		c.RedisTimeout.Duration = DefaultRedisTimeout
	}
	if c.FallbackAfter == 0 {
		c.FallbackAfter = DefaultFallbackAfter
	}
	if c.Heartbeat.Duration == 0 {
		c.Heartbeat.Duration = DefaultHeartbeat
	}
	if c.FailureMode == "" {
		c.FailureMode = FailureOpen
	}
	return c
}

// password reads Redis.PasswordFile. Its errors name the field and the path,
// never the content.
func (c Config) password() (string, error) {
	return readPassword("passwordFile", c.Redis.PasswordFile)
}

// sentinelPassword reads Redis.SentinelPasswordFile.
func (c Config) sentinelPassword() (string, error) {
	return readPassword("sentinelPasswordFile", c.Redis.SentinelPasswordFile)
}

func readPassword(field, file string) (string, error) {
	if file == "" {
		return "", nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is in our message already
		}
		return "", fmt.Errorf("limits.shared.redis.%s: cannot read %q: %v", field, file, err)
	}
	pw := strings.TrimSpace(string(b))
	if pw == "" {
		return "", fmt.Errorf("limits.shared.redis.%s: %q is empty (leave %[1]s out for no password)", field, file)
	}
	if strings.ContainsAny(pw, "\r\n") {
		return "", fmt.Errorf("limits.shared.redis.%s: %q holds more than one line; put only the password in it", field, file)
	}
	return pw, nil
}

// redisTarget describes the configured Redis for log lines and events
// (addresses and the master's name; never credentials).
func (c Config) redisTarget() string {
	r := c.Redis
	switch {
	case r.MasterName != "":
		return fmt.Sprintf("master %q via Sentinels %s", r.MasterName, strings.Join(r.Addresses, ","))
	case len(r.Addresses) > 0:
		return "Redis Cluster " + strings.Join(r.Addresses, ",")
	}
	return r.Address
}

// tlsConfig returns the TLS configuration, or nil without TLS.
func (c Config) tlsConfig() (*tls.Config, error) {
	t := c.Redis.TLS
	if !t.Enabled {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	if cfg.ServerName == "" && c.Redis.Address != "" {
		host, _, _ := net.SplitHostPort(c.Redis.Address)
		cfg.ServerName = host
	}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("limits.shared.redis.tls.caFile: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("limits.shared.redis.tls.caFile: %q holds no PEM certificate", t.CAFile)
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}
