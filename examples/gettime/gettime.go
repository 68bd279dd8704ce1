// Package gettime is an example RAP tool server that tells the time. It
// shows the three shapes of tool the SDK supports: a tool without
// parameters (get_current_time), a tool with a validated parameter and an
// error result (get_time_in_zone), and a subscription (subscribe_clock).
//
// Serve it with:
//
//	s := gettime.New(nil)
//	if err := s.Start(ctx); err != nil { ... }
//	http.ListenAndServe("127.0.0.1:3001", s)
//
// or run "rap example gettime".
package gettime

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"time"
	_ "time/tzdata" // time zones work without a system zoneinfo database

	"github.com/gorap/gorap/rap"
)

// Name is the toolset's name in its manifest.
const Name = "gettime"

// Bounds of subscribe_clock's arguments.
const (
	// MinInterval is the shortest tick interval, in seconds.
	MinInterval = 0.1
	// MaxInterval is the longest tick interval, in seconds (one day).
	MaxInterval = 86400
	// MaxCount is the largest number of ticks one subscription may ask for.
	MaxCount = 1_000_000
)

// zoneName is the shape of an IANA time zone name such as
// "America/Argentina/Buenos_Aires" or "Etc/GMT+5". Checking it before
// time.LoadLocation keeps file-system paths out (RAP IN-5).
var zoneName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_+\-]*(/[A-Za-z0-9_+\-]+){0,3}$`)

// TimeInZone is the input of get_time_in_zone.
type TimeInZone struct {
	// Timezone is an IANA time zone name, such as "Europe/Paris".
	Timezone string `json:"timezone"`
}

// Clock is the input of subscribe_clock.
type Clock struct {
	// IntervalSeconds is the time between ticks.
	IntervalSeconds float64 `json:"interval_seconds"`
	// Count, when set, ends the subscription after that many ticks; the
	// last one is sent as the final event.
	Count int `json:"count,omitempty"`
}

// Tick is the JSON text of one subscribe_clock event.
type Tick struct {
	// Time is the tick's time in RFC 3339 with nanoseconds, in UTC.
	Time string `json:"time"`
	// N numbers the ticks from 1.
	N int `json:"n"`
}

// clockState is subscribe_clock's resume cursor.
type clockState struct {
	Sent int `json:"sent"`
}

var (
	clockSchema = json.RawMessage(fmt.Sprintf(`{
  "type": "object",
  "properties": {
    "interval_seconds": {"type": "number", "minimum": %v, "maximum": %v, "description": "Seconds between ticks, from %v to %v."},
    "count": {"type": "integer", "minimum": 1, "maximum": %d, "description": "Stop after this many ticks; omit to tick until cancelled."}
  },
  "required": ["interval_seconds"],
  "additionalProperties": false
}`, MinInterval, MaxInterval, MinInterval, MaxInterval, MaxCount))

	zoneSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "timezone": {"type": "string", "minLength": 1, "maxLength": 64, "description": "IANA time zone name, such as Europe/Paris, America/New_York or UTC."}
  },
  "required": ["timezone"],
  "additionalProperties": false
}`)
)

// New returns the gettime tool server. opts may be nil. Call Start on it
// before serving.
func New(opts *rap.ServerOptions) *rap.Server {
	if opts == nil {
		opts = &rap.ServerOptions{}
	}
	if opts.Description == "" {
		o := *opts
		o.Description = "Tells the current time, the time in any IANA time zone, and ticks like a clock."
		opts = &o
	}
	s := rap.NewServer(Name, opts)
	rap.AddTool(s, &rap.Tool{
		Name:          "get_current_time",
		Description:   "Returns the current time in UTC as an RFC 3339 timestamp.",
		InputSchema:   rap.EmptyObjectSchema, // RAP TS-8
		Annotations:   &rap.Annotations{ReadOnly: true},
		DisplayScript: `"Checking the time"`,
	}, currentTime)
	rap.AddTool(s, &rap.Tool{
		Name:          "get_time_in_zone",
		Description:   "Returns the current time in the given IANA time zone as an RFC 3339 timestamp with the zone's abbreviation.",
		InputSchema:   zoneSchema,
		Annotations:   &rap.Annotations{ReadOnly: true},
		DisplayScript: `"Time in " + args.timezone`,
	}, timeInZone)
	rap.AddSubscription(s, &rap.Tool{
		Name: "subscribe_clock",
		Description: "Subscribes to clock ticks: one event every interval_seconds whose text is JSON " +
			`{"time": RFC 3339 time, "n": tick number}. With count, the count-th tick is the final event.`,
		InputSchema: clockSchema,
		Annotations: &rap.Annotations{ReadOnly: true, LongRunning: true},
		DisplayScript: `let s = "Clock every " + args.interval_seconds + "s";
if args.count != () { s += ", " + args.count + " ticks"; }
s`,
	}, clock)
	return s
}

func currentTime(ctx context.Context, _ *rap.Call, _ struct{}) (*rap.Reply, error) {
	return rap.Text(time.Now().UTC().Format(time.RFC3339)), nil
}

func timeInZone(ctx context.Context, _ *rap.Call, in TimeInZone) (*rap.Reply, error) {
	loc, err := loadZone(in.Timezone)
	if err != nil {
		return nil, err
	}
	now := time.Now().In(loc)
	abbr, _ := now.Zone()
	return rap.Text(fmt.Sprintf("%s (%s, %s)", now.Format(time.RFC3339), loc, abbr)), nil
}

// loadZone loads an IANA zone, or returns an error result text that says
// what a valid name looks like (RAP RE-4).
func loadZone(name string) (*time.Location, error) {
	bad := func() error {
		return fmt.Errorf("Error: %q is not an IANA time zone name. Use a name such as \"Europe/Paris\", \"America/New_York\", \"Asia/Tokyo\" or \"UTC\" (Region/City, case-sensitive)", name)
	}
	if name == "Local" || !zoneName.MatchString(name) {
		return nil, bad()
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, bad()
	}
	return loc, nil
}

func clock(ctx context.Context, sub *rap.Subscription, in Clock) error {
	var st clockState
	if raw := sub.State(); len(raw) > 0 {
		// A resumed subscription carries on from its last tick.
		if err := json.Unmarshal(raw, &st); err != nil {
			return fmt.Errorf("Error: the clock's saved state is unreadable (%v); subscribe again", err)
		}
	}
	interval := time.Duration(in.IntervalSeconds * float64(time.Second))
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case now := <-t.C:
			st.Sent++
			text, _ := json.Marshal(Tick{Time: now.UTC().Format(time.RFC3339Nano), N: st.Sent})
			if in.Count > 0 && st.Sent >= in.Count {
				return sub.Final(ctx, string(text), false)
			}
			if err := sub.Emit(ctx, string(text)); err != nil {
				return err
			}
			// Record the tick even when a shutdown cancelled ctx just
			// after it was sent, or the resumed clock would repeat it.
			state, _ := json.Marshal(st)
			if err := sub.SaveState(context.WithoutCancel(ctx), state); err != nil {
				return err
			}
		}
	}
}
