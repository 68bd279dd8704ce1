package config

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Environment variables read by FromEnv. Flags override them; they override
// the defaults.
const (
	EnvConfig = "RAP_CONFIG" // tool-server config file(s), separated by the OS list separator
	EnvListen = "RAP_LISTEN" // listen address
	// EnvMetricsListen is a second listen address serving only /metrics,
	// without the client token.
	EnvMetricsListen = "RAP_METRICS_LISTEN"
	EnvPublicURL     = "RAP_PUBLIC_URL"   // base URL tools call back to
	EnvDataDir       = "RAP_DATA_DIR"     // directory of the store and callback key
	EnvModel         = "RAP_MODEL"        // PROVIDER:MODEL
	EnvToken         = "RAP_TOKEN"        // bearer token required by the client API
	EnvToolToken     = "RAP_TOOL_TOKEN"   // bearer token sent to tool servers
	EnvLogLevel      = "RAP_LOG_LEVEL"    // debug, info, warn or error
	EnvSystem        = "RAP_SYSTEM"       // system prompt
	EnvToolTimeout   = "RAP_TOOL_TIMEOUT" // default per-tool timeout (Go duration), 0 = none
	// EnvMaxSubscriptions is the most active subscriptions one thread may
	// have (RAP SU-8); 0 = the runtime's default.
	EnvMaxSubscriptions = "RAP_MAX_SUBSCRIPTIONS"
	// EnvModelIdleTimeout cuts a completion whose stream sends nothing for
	// this long (Go duration); 0 = the runtime's default (60s).
	EnvModelIdleTimeout = "RAP_MODEL_IDLE_TIMEOUT"
	// EnvModelTimeout bounds one completion (Go duration); 0 = the
	// runtime's default (10m).
	EnvModelTimeout = "RAP_MODEL_TIMEOUT"
	// EnvModelAttempts is how many times one input is tried with the model
	// before the thread waits for the next message; 0 = the default (5).
	EnvModelAttempts = "RAP_MODEL_ATTEMPTS"
	// EnvModelRetryBackoff is the wait before the first automatic retry of
	// a failed completion, doubled for each next one (Go duration); 0 =
	// the runtime's default (5s).
	EnvModelRetryBackoff = "RAP_MODEL_RETRY_BACKOFF"
	// EnvUserID is the user id of sessions created without one.
	EnvUserID = "RAP_USER_ID"
	// EnvChoiceResponseHosts lists, comma-separated, hosts besides a tool's
	// own to which the runtime may POST a user's choice.
	EnvChoiceResponseHosts = "RAP_CHOICE_RESPONSE_HOSTS"
	// EnvCallStatusAfter is how long a call may stay silent before the
	// runtime asks its tool server about it (Go duration; negative = never).
	EnvCallStatusAfter = "RAP_CALL_STATUS_AFTER"
	// EnvStore selects the store: "sqlite" (the default: a file in the
	// data dir) or a postgres:// URL shared by several processes (issue
	// 14). The URL may hold a password: it is never logged.
	EnvStore = "RAP_STORE"
	// EnvLeaseTTL is how long a process's claim (lease) on a thread in a
	// shared store lasts without renewal (Go duration, at least
	// MinLeaseTTL); a thread held by a process that died resumes on
	// another within it plus the sweep interval.
	EnvLeaseTTL = "RAP_LEASE_TTL"
	// EnvSweepEvery is how often a process on a shared store looks for
	// threads with queued input that no live process holds (Go duration,
	// at least MinSweepEvery).
	EnvSweepEvery = "RAP_SWEEP_EVERY"
	// EnvAllowedHosts lists, comma-separated, host names the client API and
	// the web UI answer to besides loopback names, IP addresses and the
	// public URL's host (a reverse proxy's name, a cluster service).
	EnvAllowedHosts = "RAP_ALLOWED_HOSTS"
	// EnvAllowedOrigins lists, comma-separated, origins
	// (scheme://host[:port]) of other sites' pages that may use the client
	// API.
	EnvAllowedOrigins = "RAP_ALLOWED_ORIGINS"
	// EnvTokensFile names a file of client tokens, each bound to a user
	// (or an admin token); it is read again when it changes.
	EnvTokensFile = "RAP_TOKENS_FILE"
	// EnvTLSCert and EnvTLSKey name a PEM certificate (chain) and its
	// private key: with both, rap serve serves HTTPS.
	EnvTLSCert = "RAP_TLS_CERT"
	EnvTLSKey  = "RAP_TLS_KEY"
)

// Defaults and floors of the lease settings. The defaults are those of
// runtime.Config (runtime.DefaultLeaseTTL, runtime.DefaultSweepEvery).
const (
	DefaultLeaseTTL   = 15 * time.Second
	DefaultSweepEvery = time.Second
	// MinLeaseTTL is the shortest accepted LeaseTTL: a lease is renewed
	// every third of it, so a shorter one would be lost by a process
	// that merely pauses (a garbage collection, a slow commit) and its
	// threads taken while it still works on them.
	MinLeaseTTL = time.Second
	// MinSweepEvery is the shortest accepted SweepEvery: every sweep is a
	// query of each process, and a sweep more often gains nothing once
	// it is small next to the lease.
	MinSweepEvery = 100 * time.Millisecond
)

// MaxSubscriptionsLimit is the largest accepted MaxSubscriptions: a bound
// on the work one thread can ask of its tool servers, far above any real
// need.
const MaxSubscriptionsLimit = 1 << 16

// DefaultListen is the listen address when neither --listen nor RAP_LISTEN
// is given.
const DefaultListen = "127.0.0.1:8080"

// Settings are the runtime's settings, resolved from defaults, the
// environment and command-line flags, in increasing order of precedence.
type Settings struct {
	// ConfigFiles are tool-server config files read instead of the
	// project-level and user-level pair; empty means the pair.
	ConfigFiles []string
	// Listen is the address the HTTP server listens on.
	Listen string
	// MetricsListen, when set, is a second address serving only GET
	// /metrics, without the client token: for a private network that a
	// Prometheus server scrapes. The main address serves /metrics too,
	// behind the client token.
	MetricsListen string
	// PublicURL is the base URL tools call back to. Empty means derived from
	// the bound listen address (see PublicURLFor).
	PublicURL string
	// DataDir holds the SQLite store and the callback key.
	DataDir string
	// Store is "" or "sqlite" for the SQLite store in DataDir, or a
	// postgres:// (postgresql://) URL of a PostgreSQL database that
	// several processes may share. It may hold a password: see
	// StoreLabel for logs.
	Store string
	// Model is PROVIDER:MODEL (anthropic:…, openai:…, scripted:PATH).
	Model string
	// Token, when set, is required as "Authorization: Bearer TOKEN" on the
	// client API. It is a secret and never logged.
	Token string
	// ToolToken, when set, is sent as a bearer token to tool servers
	// (RAP TR-8). It is a secret and never logged.
	ToolToken string
	// LogLevel is debug, info, warn or error.
	LogLevel string
	// System is the system prompt given to the model.
	System string
	// ToolTimeout is the default per-tool timeout; 0 means none (RAP RT-5).
	ToolTimeout time.Duration
	// MaxSubscriptions is the most active subscriptions one thread may
	// have (RAP SU-8); 0 means the runtime's default
	// (runtime.DefaultMaxSubscriptionsPerThread). It maps to
	// runtime.Config.MaxSubscriptionsPerThread.
	MaxSubscriptions int
	// ModelIdleTimeout, ModelTimeout, ModelAttempts and ModelRetryBackoff
	// map to runtime.Config.ModelIdleTimeout, ModelTimeout,
	// ModelRetry.Attempts and ModelRetry.Initial; zero means the
	// runtime's default.
	ModelIdleTimeout  time.Duration
	ModelTimeout      time.Duration
	ModelAttempts     int
	ModelRetryBackoff time.Duration
	// Insecure allows serving the client API beyond loopback without a
	// Token. Only a command-line flag sets it (--insecure), never the
	// environment.
	Insecure bool
	// UserID is the user id of sessions created without one, sent as
	// user_id in their invocations; empty means none. It maps to
	// runtime.Config.DefaultUserID.
	UserID string
	// ChoiceResponseHosts are hosts ("host" or "host:port"), besides the
	// tool's own, to which the runtime may POST a user's answer to a
	// user_choice. It maps to runtime.Config.ChoiceResponseHosts.
	ChoiceResponseHosts []string
	// CallStatusAfter is how long a dispatched call or an active
	// subscription may stay silent before the runtime asks its tool server
	// POST {base}/tool_call_status; 0 means the runtime's default (10
	// minutes), negative turns the checks off. It maps to
	// runtime.Config.CallStatusAfter.
	CallStatusAfter time.Duration
	// LeaseTTL is how long a process's lease on a thread in a shared
	// (PostgreSQL) store lasts without renewal: a thread held by a
	// process that is killed resumes on another within LeaseTTL plus
	// SweepEvery. Zero means DefaultLeaseTTL; otherwise at least
	// MinLeaseTTL. It maps to runtime.Config.LeaseTTL and is unused on
	// SQLite.
	LeaseTTL time.Duration
	// SweepEvery is how often a process on a shared store looks for
	// threads with queued input that no live process holds. Zero means
	// DefaultSweepEvery; otherwise at least MinSweepEvery. It maps to
	// runtime.Config.SweepEvery and is unused on SQLite.
	SweepEvery time.Duration
	// AllowedHosts are host names (or host:port) the client API and the
	// web UI answer to besides loopback names, IP addresses and the
	// public URL's host; "*.example.com" allows its subdomains, "*" turns
	// the check off. It maps to runtime.Config.AllowedHosts.
	AllowedHosts []string
	// AllowedOrigins are origins whose pages may use the client API from
	// another site. It maps to runtime.Config.AllowedOrigins.
	AllowedOrigins []string
	// TokensFile is a file of client tokens, each bound to a user or
	// marked admin (see docs/security.md); empty means none. With it,
	// Token (if set) is an admin token.
	TokensFile string
	// TLSCert and TLSKey are PEM files of a certificate chain and its
	// key: with both, the runtime serves HTTPS.
	TLSCert, TLSKey string
	// Retention, when set (by --retention or RAP_RETENTION), is how long
	// a closed session is kept after its last activity; 0 keeps sessions
	// for ever. Nil leaves it to the config files' "retention"
	// (EffectiveRetention). It maps to runtime.Config.Retention.
	Retention *time.Duration
	// Compaction is --compaction: CompactionAuto (the default, also
	// ""), CompactionGorap, CompactionProvider or CompactionOff
	// (compaction.go).
	Compaction string
	// ContextWindow, when set (by --context-window or
	// RAP_CONTEXT_WINDOW), is the model's context window in tokens; 0
	// takes the model's own. Nil leaves it to the config files'
	// "context_window" (EffectiveContextWindow). It maps to
	// runtime.Config.ContextWindow.
	ContextWindow *int
	// MaxResultShare, when set (by --max-result-share or
	// RAP_MAX_RESULT_SHARE), is the share of the context window one tool
	// result may take in a model request; 0 takes the default. Nil leaves
	// it to the config files' "max_result_share"
	// (EffectiveMaxResultShare). It maps to runtime.Config.MaxResultShare.
	MaxResultShare *float64
}

// Defaults returns the settings used when nothing is configured. getenv is
// consulted only for HOME and XDG_DATA_HOME, to place the data directory.
func Defaults(getenv func(string) string) Settings {
	return Settings{
		Listen:     DefaultListen,
		DataDir:    DefaultDataDir(getenv),
		LogLevel:   "info",
		LeaseTTL:   DefaultLeaseTTL,
		SweepEvery: DefaultSweepEvery,
	}
}

// DefaultDataDir returns $XDG_DATA_HOME/rap, or ~/.local/share/rap, or
// ./.rap when no home directory is known: the data directory outside a
// project. In a project (see ProjectDataDir) "rap serve" uses the
// project's own.
func DefaultDataDir(getenv func(string) string) string {
	if d := getenv("XDG_DATA_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "rap")
	}
	if home := getenv("HOME"); home != "" {
		return filepath.Join(home, ".local", "share", "rap")
	}
	return ".rap"
}

// ProjectDataDir returns the data directory of the project in dir,
// dir/.rap/data, when dir holds a project-level config file (see
// ProjectPath), and "" otherwise. Each project gets its own store, so two
// projects never answer each other's threads with the wrong tools.
func ProjectDataDir(dir string) string {
	fi, err := os.Stat(ProjectPath(dir))
	if err != nil || fi.IsDir() {
		return ""
	}
	return filepath.Join(dir, ".rap", "data")
}

// FromEnv returns the defaults overridden by the RAP_* environment
// variables. A malformed value is an error naming the variable.
func FromEnv(getenv func(string) string) (Settings, error) {
	s := Defaults(getenv)
	if v := getenv(EnvConfig); v != "" {
		s.ConfigFiles = filepath.SplitList(v)
	}
	set := func(dst *string, name string) {
		if v := getenv(name); v != "" {
			*dst = v
		}
	}
	set(&s.Listen, EnvListen)
	set(&s.MetricsListen, EnvMetricsListen)
	set(&s.PublicURL, EnvPublicURL)
	set(&s.DataDir, EnvDataDir)
	set(&s.Store, EnvStore)
	set(&s.Model, EnvModel)
	set(&s.Token, EnvToken)
	set(&s.ToolToken, EnvToolToken)
	set(&s.LogLevel, EnvLogLevel)
	set(&s.System, EnvSystem)
	if v := getenv(EnvToolTimeout); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return s, fmt.Errorf("%s=%q: want a non-negative Go duration such as 90s or 5m", EnvToolTimeout, v)
		}
		s.ToolTimeout = d
	}
	for _, d := range []struct {
		dst  *time.Duration
		name string
	}{{&s.ModelIdleTimeout, EnvModelIdleTimeout}, {&s.ModelTimeout, EnvModelTimeout}, {&s.ModelRetryBackoff, EnvModelRetryBackoff}} {
		if v := getenv(d.name); v != "" {
			n, err := time.ParseDuration(v)
			if err != nil || n < 0 {
				return s, fmt.Errorf("%s=%q: want a non-negative Go duration such as 90s or 5m (0 for the default)", d.name, v)
			}
			*d.dst = n
		}
	}
	if v := getenv(EnvModelAttempts); v != "" {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 0 {
			return s, fmt.Errorf("%s=%q: want a whole number, 1 or more (or 0 for the default)", EnvModelAttempts, v)
		}
		s.ModelAttempts = n
	}
	set(&s.UserID, EnvUserID)
	if v := getenv(EnvChoiceResponseHosts); v != "" {
		s.ChoiceResponseHosts = nil
		for _, h := range strings.Split(v, ",") {
			if h = strings.TrimSpace(h); h != "" {
				s.ChoiceResponseHosts = append(s.ChoiceResponseHosts, h)
			}
		}
	}
	if v := getenv(EnvCallStatusAfter); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return s, fmt.Errorf("%s=%q: want a Go duration such as 10m (negative turns the checks off)", EnvCallStatusAfter, v)
		}
		s.CallStatusAfter = d
	}
	if v := getenv(EnvMaxSubscriptions); v != "" {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 0 || n > MaxSubscriptionsLimit {
			return s, fmt.Errorf("%s=%q: want a whole number from 1 to %d (or 0 for the default)", EnvMaxSubscriptions, v, MaxSubscriptionsLimit)
		}
		s.MaxSubscriptions = n
	}
	for _, l := range []struct {
		dst  *[]string
		name string
	}{{&s.AllowedHosts, EnvAllowedHosts}, {&s.AllowedOrigins, EnvAllowedOrigins}} {
		if v := getenv(l.name); v != "" {
			*l.dst = nil
			for _, h := range strings.Split(v, ",") {
				if h = strings.TrimSpace(h); h != "" {
					*l.dst = append(*l.dst, h)
				}
			}
		}
	}
	set(&s.TokensFile, EnvTokensFile)
	set(&s.TLSCert, EnvTLSCert)
	set(&s.TLSKey, EnvTLSKey)
	if v := getenv(EnvRetention); v != "" {
		if err := (retentionValue{&s.Retention}).Set(v); err != nil {
			return s, fmt.Errorf("%s=%q: %v", EnvRetention, v, err)
		}
	}
	if v := getenv(EnvCompaction); v != "" {
		if err := (compactionValue{&s.Compaction}).Set(v); err != nil {
			return s, fmt.Errorf("%s=%q: %v", EnvCompaction, v, err)
		}
	}
	if v := getenv(EnvContextWindow); v != "" {
		if err := (contextWindowValue{&s.ContextWindow}).Set(v); err != nil {
			return s, fmt.Errorf("%s=%q: %v", EnvContextWindow, v, err)
		}
	}
	if v := getenv(EnvMaxResultShare); v != "" {
		if err := (shareValue{&s.MaxResultShare}).Set(v); err != nil {
			return s, fmt.Errorf("%s=%q: %v", EnvMaxResultShare, v, err)
		}
	}
	for _, d := range []*minDuration{leaseTTLValue(&s), sweepEveryValue(&s)} {
		if v := getenv(d.env); v != "" {
			if err := d.Set(v); err != nil {
				return s, fmt.Errorf("%s=%q: %v", d.env, v, err)
			}
		}
	}
	return s, nil
}

// RegisterFlags defines the runtime's flags on fs, bound to s: parse the
// environment first (FromEnv), then the flags, so that flags win. Secrets
// are never shown as flag defaults.
func (s *Settings) RegisterFlags(fs *flag.FlagSet) {
	fs.Var(&listValue{dst: &s.ConfigFiles}, "config", "tool-server config `FILE` (repeatable); replaces the project-level .rap/rap.json and user-level ~/.config/rap/rap.json (env "+EnvConfig+")")
	fs.StringVar(&s.Listen, "listen", s.Listen, "listen `ADDR` of the HTTP server (env "+EnvListen+")")
	fs.StringVar(&s.MetricsListen, "metrics-listen", s.MetricsListen, "also serve GET /metrics (Prometheus) on `ADDR`, WITHOUT the client token: listen on loopback or a private network only, never where the public can reach it; the main address serves /metrics behind the token either way (env "+EnvMetricsListen+")")
	fs.StringVar(&s.PublicURL, "public-url", s.PublicURL, "base `URL` tools call back to; default derived from the listen address (env "+EnvPublicURL+")")
	fs.StringVar(&s.DataDir, "data-dir", s.DataDir, "`DIR` of the SQLite store and the callback key; default .rap/data in a project (a directory with .rap/rap.json), else the one shown (env "+EnvDataDir+")")
	fs.StringVar(&s.Store, "store", s.Store, "`STORE`: sqlite (default, in the data dir) or a postgres://user@host:5432/db URL that several rap serve processes may share (env "+EnvStore+"; prefer the env var for a URL with a password: flags show in ps)")
	fs.StringVar(&s.Model, "model", s.Model, "model as `PROVIDER:MODEL`: anthropic:MODEL, openai:MODEL or scripted:PATH (env "+EnvModel+")")
	fs.Var((*secretValue)(&s.Token), "token", "bearer `TOKEN` required by the client API (env "+EnvToken+"; prefer the env var: flags show in ps)")
	fs.Var((*secretValue)(&s.ToolToken), "tool-token", "bearer `TOKEN` sent to tool servers (env "+EnvToolToken+")")
	fs.StringVar(&s.LogLevel, "log-level", s.LogLevel, "log `LEVEL`: debug, info, warn or error (env "+EnvLogLevel+")")
	fs.StringVar(&s.System, "system", s.System, "system `PROMPT` for the model (env "+EnvSystem+")")
	fs.DurationVar(&s.ToolTimeout, "tool-timeout", s.ToolTimeout, "default per-tool `TIMEOUT` after which a pending call gets an error result; 0 = none (env "+EnvToolTimeout+")")
	fs.DurationVar(&s.ModelIdleTimeout, "model-idle-timeout", s.ModelIdleTimeout, "cut a completion whose stream sends nothing for `D`; 0 = 60s (env "+EnvModelIdleTimeout+")")
	fs.DurationVar(&s.ModelTimeout, "model-timeout", s.ModelTimeout, "cut a completion that lasts longer than `D`; 0 = 10m (env "+EnvModelTimeout+")")
	fs.IntVar(&s.ModelAttempts, "model-attempts", s.ModelAttempts, "try one input with the model `N` times, retrying on its own, before waiting for the next message; 0 = 5 (env "+EnvModelAttempts+")")
	fs.DurationVar(&s.ModelRetryBackoff, "model-retry-backoff", s.ModelRetryBackoff, "wait `D` before the first automatic retry of a failed completion, doubling each time; 0 = 5s (env "+EnvModelRetryBackoff+")")
	fs.BoolVar(&s.Insecure, "insecure", s.Insecure, "serve the client API on a non-loopback address without a token ("+EnvToken+"); anyone who reaches it can read and drive every conversation")
	fromEnv := true // the first --choice-response-host replaces the environment's list
	fs.Func("choice-response-host", "`HOST` (or HOST:PORT) besides a tool's own to which a user's choice may be POSTed; repeatable (env "+EnvChoiceResponseHosts+", comma-separated)", func(v string) error {
		if v = strings.TrimSpace(v); v == "" || strings.ContainsAny(v, "/ ") {
			return fmt.Errorf("want a host name or host:port such as approvals.internal:8443")
		}
		if fromEnv {
			s.ChoiceResponseHosts, fromEnv = nil, false
		}
		s.ChoiceResponseHosts = append(s.ChoiceResponseHosts, v)
		return nil
	})
	fs.StringVar(&s.UserID, "user-id", s.UserID, "`ID` of the end user of sessions created without one, sent as user_id in their invocations (env "+EnvUserID+")")
	fs.DurationVar(&s.CallStatusAfter, "call-status-after", s.CallStatusAfter, "`SILENCE` after which the runtime asks a tool server whether it still knows a pending call (POST /tool_call_status); 0 = the default of 10m, negative = never (env "+EnvCallStatusAfter+")")
	fs.Var(leaseTTLValue(s), "lease-ttl", "with a shared postgres:// store: how long a process's lease on a thread lasts, `D`, renewed every D/3; a thread held by a process that is killed resumes on another within D plus --sweep-every. Shorter fails over faster, but a process that stalls for 2/3 of D loses its threads; at least "+MinLeaseTTL.String()+"; unused with SQLite (env "+EnvLeaseTTL+")")
	fs.Var(sweepEveryValue(s), "sweep-every", "with a shared postgres:// store: how often, `D`, each process looks for threads with queued input that no live process holds (a killed one's, once its leases expire) and for timers other processes wrote; at least "+MinSweepEvery.String()+"; unused with SQLite (env "+EnvSweepEvery+")")
	fs.Var(&commaList{dst: &s.AllowedHosts, check: checkAllowedHost}, "allowed-hosts", "`HOSTS` (comma-separated, repeatable) the client API and web UI answer to besides loopback names, IP addresses and the --public-url host: a reverse proxy's or cluster's names; *.example.com allows subdomains, * allows any. Requests naming another host are refused, so a web page cannot rebind its name to this runtime (env "+EnvAllowedHosts+")")
	fs.Var(&commaList{dst: &s.AllowedOrigins, check: checkAllowedOrigin}, "allowed-origins", "`ORIGINS` (comma-separated, repeatable) such as https://app.example.com whose pages may use the client API from another site; by default only the runtime's own web UI may (env "+EnvAllowedOrigins+")")
	fs.StringVar(&s.TokensFile, "tokens-file", s.TokensFile, "`FILE` of client tokens, each bound to a user (who then sees only their own sessions) or marked admin; mode 0600, read again when it changes; see docs/security.md (env "+EnvTokensFile+")")
	fs.StringVar(&s.TLSCert, "tls-cert", s.TLSCert, "serve HTTPS with the certificate chain in PEM `FILE` (with --tls-key) (env "+EnvTLSCert+")")
	fs.StringVar(&s.TLSKey, "tls-key", s.TLSKey, "the private key in PEM `FILE` of --tls-cert; refused when every user may read it (env "+EnvTLSKey+")")
	fs.Var(retentionValue{&s.Retention}, "retention", "delete closed sessions `D` after their last activity (a Go duration such as 720h, at least "+MinRetention.String()+"); 0 keeps them for ever, the default; overrides \"retention\" in rap.json (env "+EnvRetention+")")
	fs.Var(compactionValue{&s.Compaction}, "compaction", "`MODE` of keeping long threads within the model's context window: auto (the default) uses the model provider's own compaction where the model has one (Anthropic's server-side compaction: claude-opus-4-6, claude-sonnet-4-6), else gorap's; gorap summarises a thread's older history with its model when a request passes 75 % of the window (the store keeps every message); provider uses only the provider's own and refuses to start without it; off sends the whole history every time (env "+EnvCompaction+")")
	fs.Var(contextWindowValue{&s.ContextWindow}, "context-window", "the model's context window in `TOKENS`, such as 200000: each tool result sent to the model takes at most --max-result-share of it (the whole result is kept); default: the model's published window for the Anthropic and OpenAI models gorap knows, else 128000; overrides \"context_window\" in rap.json (env "+EnvContextWindow+")")
	fs.Var(shareValue{&s.MaxResultShare}, "max-result-share", "the most of the context window one tool result may take in a model request, a `SHARE` above 0 and at most 1; a longer result is sent as its start and end with a note; 0 = the default of 0.1 (a tenth); overrides \"max_result_share\" in rap.json (env "+EnvMaxResultShare+")")
	fs.IntVar(&s.MaxSubscriptions, "max-subscriptions", s.MaxSubscriptions, "most active subscriptions one thread may have, `N`; one more gets an error result and is cancelled (RAP SU-8); 0 = the runtime's default of 32 (env "+EnvMaxSubscriptions+")")
}

// Check validates the settings and returns an error naming the first bad
// one.
func (s *Settings) Check() error {
	if _, _, err := net.SplitHostPort(s.Listen); err != nil {
		return fmt.Errorf("listen address %q: %v; want HOST:PORT such as 127.0.0.1:8080", s.Listen, err)
	}
	if s.MetricsListen != "" {
		if _, _, err := net.SplitHostPort(s.MetricsListen); err != nil {
			return fmt.Errorf("metrics listen address %q: %v; want HOST:PORT such as 10.0.0.5:9464; pass --metrics-listen ADDR or set %s", s.MetricsListen, err, EnvMetricsListen)
		}
		if s.MetricsListen == s.Listen {
			return fmt.Errorf("metrics listen address %q is the listen address: give --metrics-listen an address of its own (the listen address serves /metrics behind the client token already)", s.MetricsListen)
		}
	}
	if s.PublicURL != "" {
		u, err := url.Parse(s.PublicURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("public URL %q: want an absolute http:// or https:// URL such as http://agent.example:8080", s.PublicURL)
		}
		if u.RawQuery != "" || u.Fragment != "" {
			return fmt.Errorf("public URL %q: must not have a query or fragment", s.PublicURL)
		}
	}
	if s.DataDir == "" {
		return errors.New("data dir is empty; pass --data-dir DIR or set " + EnvDataDir)
	}
	if !s.StoreIsPostgres() && s.Store != "" && s.Store != "sqlite" {
		return fmt.Errorf("store %q: want sqlite or a postgres://user@host:5432/db URL; pass --store or set %s", StoreLabel(s.Store), EnvStore)
	}
	if _, err := ParseLogLevel(s.LogLevel); err != nil {
		return err
	}
	if s.ToolTimeout < 0 {
		return fmt.Errorf("tool timeout %v: must not be negative", s.ToolTimeout)
	}
	if s.ModelIdleTimeout < 0 || s.ModelTimeout < 0 || s.ModelRetryBackoff < 0 || s.ModelAttempts < 0 {
		return fmt.Errorf("model limits (idle timeout %v, timeout %v, retry backoff %v, attempts %d) must not be negative; use 0 for the defaults",
			s.ModelIdleTimeout, s.ModelTimeout, s.ModelRetryBackoff, s.ModelAttempts)
	}
	if len(s.UserID) > 256 || strings.ContainsFunc(s.UserID, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return fmt.Errorf("user id %q: want at most 256 bytes without control characters; pass --user-id ID or set %s", s.UserID, EnvUserID)
	}
	if s.MaxSubscriptions < 0 || s.MaxSubscriptions > MaxSubscriptionsLimit {
		return fmt.Errorf("max subscriptions %d: want a number from 1 to %d, or 0 for the default; pass --max-subscriptions N or set %s", s.MaxSubscriptions, MaxSubscriptionsLimit, EnvMaxSubscriptions)
	}
	if s.LeaseTTL != 0 && s.LeaseTTL < MinLeaseTTL {
		return fmt.Errorf("lease TTL %v: want at least %v (0 for the default of %v); pass --lease-ttl D or set %s", s.LeaseTTL, MinLeaseTTL, DefaultLeaseTTL, EnvLeaseTTL)
	}
	if s.SweepEvery != 0 && s.SweepEvery < MinSweepEvery {
		return fmt.Errorf("sweep interval %v: want at least %v (0 for the default of %v); pass --sweep-every D or set %s", s.SweepEvery, MinSweepEvery, DefaultSweepEvery, EnvSweepEvery)
	}
	if (s.TLSCert == "") != (s.TLSKey == "") {
		return fmt.Errorf("HTTPS needs both a certificate and its key: pass --tls-cert FILE and --tls-key FILE (or set %s and %s), or neither", EnvTLSCert, EnvTLSKey)
	}
	for _, h := range s.AllowedHosts {
		if err := checkAllowedHost(h); err != nil {
			return fmt.Errorf("allowed hosts: %v; pass --allowed-hosts or set %s", err, EnvAllowedHosts)
		}
	}
	for _, o := range s.AllowedOrigins {
		if err := checkAllowedOrigin(o); err != nil {
			return fmt.Errorf("allowed origins: %v; pass --allowed-origins or set %s", err, EnvAllowedOrigins)
		}
	}
	return nil
}

// ParseLogLevel parses debug, info, warn or error.
func ParseLogLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("log level %q: want debug, info, warn or error", s)
	}
	return l, nil
}

// PublicURLFor returns the public URL: s.PublicURL when set, else one
// derived from the bound listen address addr (such as "127.0.0.1:8080" or
// "[::]:8080"). An unspecified host (0.0.0.0, ::, empty) becomes the
// loopback address, which tools on the same machine can reach.
func (s *Settings) PublicURLFor(addr string) (string, error) {
	if s.PublicURL != "" {
		return strings.TrimRight(s.PublicURL, "/"), nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("derive the public URL from listen address %q: %v; pass --public-url", addr, err)
	}
	if port == "0" || port == "" {
		return "", fmt.Errorf("derive the public URL from listen address %q: the port is not known yet; use the bound address", addr)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	scheme := "http"
	if s.TLSCert != "" {
		scheme = "https"
	}
	return scheme + "://" + net.JoinHostPort(host, port), nil
}

// ToolServers loads the tool-server configuration: s.ConfigFiles when set
// (merged in order), else the project-level file of dir and the user-level
// file. It returns the base URLs and the files read.
func (s *Settings) ToolServers(dir string, getenv func(string) string) ([]string, []string, error) {
	f, used, err := s.LoadToolSets(dir, getenv)
	if err != nil {
		return nil, used, err
	}
	return f.ServerURLs(), used, nil
}

// LoadToolSets is ToolServers returning the merged file itself.
func (s *Settings) LoadToolSets(dir string, getenv func(string) string) (*File, []string, error) {
	if len(s.ConfigFiles) > 0 {
		merged := &File{}
		var used []string
		for _, p := range s.ConfigFiles {
			f, err := LoadFile(p)
			if err != nil {
				return nil, used, err
			}
			merged.Merge(f)
			used = append(used, p)
		}
		return merged, used, nil
	}
	user, err := UserPath(getenv)
	if err != nil {
		user = ""
	}
	return LoadMerged(ProjectPath(dir), user)
}

// LogValue implements slog.LogValuer: the settings without their secrets.
func (s Settings) LogValue() slog.Value {
	return slog.GroupValue(
		slog.Any("config", s.ConfigFiles),
		slog.String("listen", s.Listen),
		slog.String("metrics_listen", s.MetricsListen),
		slog.String("public_url", s.PublicURL),
		slog.String("data_dir", s.DataDir),
		slog.String("store", StoreLabel(s.Store)),
		slog.String("model", s.Model),
		slog.String("token", redact(s.Token)),
		slog.String("tool_token", redact(s.ToolToken)),
		slog.String("log_level", s.LogLevel),
		slog.Int("system_prompt_chars", len(s.System)),
		slog.Duration("tool_timeout", s.ToolTimeout),
		slog.Int("max_subscriptions", s.MaxSubscriptions),
		slog.Duration("model_idle_timeout", s.ModelIdleTimeout),
		slog.Duration("model_timeout", s.ModelTimeout),
		slog.Int("model_attempts", s.ModelAttempts),
		slog.Duration("model_retry_backoff", s.ModelRetryBackoff),
		slog.String("user_id", s.UserID),
		slog.Any("choice_response_hosts", s.ChoiceResponseHosts),
		slog.Duration("call_status_after", s.CallStatusAfter),
		slog.Duration("lease_ttl", s.LeaseTTL),
		slog.Duration("sweep_every", s.SweepEvery),
		slog.Any("allowed_hosts", s.AllowedHosts),
		slog.Any("allowed_origins", s.AllowedOrigins),
		slog.String("tokens_file", s.TokensFile),
		slog.String("tls_cert", s.TLSCert),
		slog.String("retention", retentionValue{&s.Retention}.String()),
		slog.String("context_window", contextWindowValue{&s.ContextWindow}.String()),
		slog.String("max_result_share", shareValue{&s.MaxResultShare}.String()),
	)
}

// StoreIsPostgres reports whether Store names a PostgreSQL database.
func (s Settings) StoreIsPostgres() bool {
	return strings.HasPrefix(s.Store, "postgres://") || strings.HasPrefix(s.Store, "postgresql://")
}

// StoreLabel describes a Store setting for logs and errors: "sqlite", or
// the URL's scheme, host and path without user, password or parameters.
func StoreLabel(store string) string {
	if store == "" || store == "sqlite" {
		return "sqlite"
	}
	u, err := url.Parse(store)
	if err != nil || u.Host == "" {
		return "(unparsable store URL)"
	}
	return u.Scheme + "://" + u.Host + u.Path
}

// String describes the settings without their secrets.
func (s Settings) String() string {
	return fmt.Sprintf("listen=%s public_url=%s data_dir=%s model=%s token=%s tool_token=%s",
		s.Listen, s.PublicURL, s.DataDir, s.Model, redact(s.Token), redact(s.ToolToken))
}

func redact(secret string) string {
	if secret == "" {
		return "(unset)"
	}
	return "(set)"
}

// listValue is a repeatable string flag; its first use on the command line
// replaces the values taken from the environment.
type listValue struct {
	dst     *[]string
	fromCLI bool
}

func (l *listValue) String() string {
	if l == nil || l.dst == nil {
		return ""
	}
	return strings.Join(*l.dst, string(os.PathListSeparator))
}

func (l *listValue) Set(v string) error {
	if v == "" {
		return errors.New("empty file name")
	}
	if !l.fromCLI {
		l.fromCLI = true
		*l.dst = nil
	}
	*l.dst = append(*l.dst, v)
	return nil
}

// commaList is a repeatable flag of comma-separated values; its first
// use on the command line replaces the values taken from the
// environment, and check refuses a malformed value.
type commaList struct {
	dst     *[]string
	check   func(string) error
	fromCLI bool
}

func (l *commaList) String() string {
	if l == nil || l.dst == nil {
		return ""
	}
	return strings.Join(*l.dst, ",")
}

func (l *commaList) Set(v string) error {
	if !l.fromCLI {
		l.fromCLI = true
		*l.dst = nil
	}
	for _, item := range strings.Split(v, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		if err := l.check(item); err != nil {
			return err
		}
		*l.dst = append(*l.dst, item)
	}
	return nil
}

// checkAllowedHost refuses what cannot be a host name or host:port.
func checkAllowedHost(h string) error {
	if strings.ContainsAny(h, "/ @?#") {
		return fmt.Errorf("%q is not a host name: want a name such as agent.example.com, agent.example.com:8443 or *.example.com", h)
	}
	return nil
}

// checkAllowedOrigin refuses what is not an http(s) origin.
func checkAllowedOrigin(o string) error {
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
		return fmt.Errorf("%q is not an origin: want scheme://host[:port] such as https://app.example.com", o)
	}
	return nil
}

// secretValue is a string flag whose value is never printed.
type secretValue string

func (v *secretValue) String() string { return "" }

func (v *secretValue) Set(s string) error {
	*v = secretValue(s)
	return nil
}

// minDuration is a duration flag with a floor: a value below it, zero
// and negative ones included, is rejected when it is set (from the
// command line or the environment), with an error saying what is wanted.
type minDuration struct {
	dst     *time.Duration
	min     time.Duration
	env     string
	example string
}

func leaseTTLValue(s *Settings) *minDuration {
	return &minDuration{dst: &s.LeaseTTL, min: MinLeaseTTL, env: EnvLeaseTTL, example: "15s"}
}

func sweepEveryValue(s *Settings) *minDuration {
	return &minDuration{dst: &s.SweepEvery, min: MinSweepEvery, env: EnvSweepEvery, example: "1s"}
}

func (m *minDuration) String() string {
	if m == nil || m.dst == nil {
		return ""
	}
	return m.dst.String()
}

func (m *minDuration) Set(v string) error {
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil || d < m.min {
		return fmt.Errorf("want a Go duration of at least %v, such as %s", m.min, m.example)
	}
	*m.dst = d
	return nil
}

// Type names the flag's kind in help and errors (pflag.Value).
func (m *minDuration) Type() string { return "duration" }
