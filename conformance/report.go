package conformance

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is the outcome of a suite's run.
type Report struct {
	// Suite is the suite's name: "tool" or "runtime".
	Suite string `json:"suite"`
	// Subject is what was checked, such as the tool server's URL.
	Subject  string        `json:"subject"`
	Started  time.Time     `json:"started"`
	Duration time.Duration `json:"duration_ns"`
	Results  []Result      `json:"results"`
}

// Failed reports whether a Must check failed: the implementation does not
// conform.
func (r *Report) Failed() bool {
	for _, res := range r.Results {
		if res.Status == Fail && res.Level == Must {
			return true
		}
	}
	return false
}

// Count returns how many checks ended with status s, and of those, how many
// were at level l ("" counts every level).
func (r *Report) Count(s Status, l Level) int {
	n := 0
	for _, res := range r.Results {
		if res.Status == s && (l == "" || res.Level == l) {
			n++
		}
	}
	return n
}

// Result returns the result of the check with the given ID, and whether the
// report has it.
func (r *Report) Result(id string) (Result, bool) {
	for _, res := range r.Results {
		if res.ID == id {
			return res, true
		}
	}
	return Result{}, false
}

// Summary returns one line of counts, such as "31 passed, 2 failed (1 MUST,
// 1 SHOULD), 4 skipped".
func (r *Report) Summary() string {
	failed := r.Count(Fail, "")
	s := fmt.Sprintf("%d passed, %d failed", r.Count(Pass, ""), failed)
	if failed > 0 {
		var by []string
		for _, l := range []Level{Must, Should, Extension} {
			if n := r.Count(Fail, l); n > 0 {
				by = append(by, fmt.Sprintf("%d %s", n, l))
			}
		}
		s += " (" + strings.Join(by, ", ") + ")"
	}
	return s + fmt.Sprintf(", %d skipped", r.Count(Skip, ""))
}

// WriteText writes the report as a table for people: one line a check, and
// under each failure its fix and where the check is explained. With verbose,
// each failure also shows the HTTP exchanges behind it, and skipped checks
// say why.
func (r *Report) WriteText(w io.Writer, verbose bool) error {
	ew := &errWriter{w: w}
	fmt.Fprintf(ew, "RAP %s conformance of %s\n\n", r.Suite, r.Subject)
	tw := tabwriter.NewWriter(ew, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STATUS\tLEVEL\tCHECK\tWHAT")
	for _, res := range r.Results {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", statusWord(res.Status), res.Level, res.ID, res.Title)
	}
	tw.Flush()
	var failures []Result
	for _, res := range r.Results {
		if res.Status == Fail {
			failures = append(failures, res)
		}
	}
	if len(failures) > 0 {
		fmt.Fprintf(ew, "\nFailures:\n")
	}
	for _, res := range failures {
		fmt.Fprintf(ew, "\n%s (%s, %s)\n", res.ID, res.Level, res.Rule)
		fmt.Fprintf(ew, "  what went wrong: %s\n", res.Message)
		fmt.Fprintf(ew, "  fix: %s\n", res.Fix)
		fmt.Fprintf(ew, "  more: %s\n", res.Link())
		if verbose {
			for _, x := range res.Exchanges {
				fmt.Fprintf(ew, "\n")
				writeIndentedTo(ew, x.String(), "  ")
			}
		}
	}
	if verbose {
		var skipped []Result
		for _, res := range r.Results {
			if res.Status == Skip {
				skipped = append(skipped, res)
			}
		}
		if len(skipped) > 0 {
			fmt.Fprintf(ew, "\nSkipped:\n")
		}
		for _, res := range skipped {
			fmt.Fprintf(ew, "  %s: %s\n", res.ID, res.Message)
		}
	}
	verdict := "conforms: no MUST failed"
	if r.Failed() {
		verdict = "does not conform: a MUST failed"
	}
	fmt.Fprintf(ew, "\n%s; %s (%s)\n", r.Summary(), verdict, r.Duration.Round(time.Millisecond))
	return ew.err
}

func statusWord(s Status) string {
	switch s {
	case Pass:
		return "ok"
	case Fail:
		return "FAIL"
	default:
		return "skip"
	}
}

func writeIndentedTo(w io.Writer, s, indent string) {
	for _, line := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		fmt.Fprintf(w, "%s%s\n", indent, line)
	}
}

// jsonResult is one line of WriteJSON's output.
type jsonResult struct {
	ID         string     `json:"id"`
	Level      Level      `json:"level"`
	Rule       string     `json:"rule"`
	Title      string     `json:"title"`
	Status     Status     `json:"status"`
	Message    string     `json:"message,omitempty"`
	Fix        string     `json:"fix,omitempty"`
	DurationMS float64    `json:"duration_ms"`
	Exchanges  []Exchange `json:"exchanges,omitempty"`
}

// WriteJSON writes one JSON object a line, one for each check: its id,
// level, rule, title, status, message, the fix when it failed and its
// duration. With verbose, a failed check's object also holds its HTTP
// exchanges.
func (r *Report) WriteJSON(w io.Writer, verbose bool) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for _, res := range r.Results {
		j := jsonResult{
			ID: res.ID, Level: res.Level, Rule: res.Rule, Title: res.Title, Status: res.Status,
			Message: res.Message, DurationMS: float64(res.Duration.Microseconds()) / 1000,
		}
		if res.Status == Fail {
			j.Fix = res.Fix
			if verbose {
				j.Exchanges = res.Exchanges
			}
		}
		if err := enc.Encode(j); err != nil {
			return err
		}
	}
	return nil
}

type junitSuites struct {
	XMLName xml.Name     `xml:"testsuites"`
	Suites  []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Skipped  int         `xml:"skipped,attr"`
	Time     string      `xml:"time,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitMessage `xml:"failure"`
	Skipped   *junitMessage `xml:"skipped"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr,omitempty"`
	Text    string `xml:",chardata"`
}

// WriteJUnit writes the report as JUnit XML, one test case a check, for CI
// systems. A failed SHOULD or extension check is a failure there too; its
// type attribute names its level, so a CI configuration can tell them
// apart. A failure's text holds its fix and the HTTP exchanges behind it.
func (r *Report) WriteJUnit(w io.Writer) error {
	s := junitSuite{
		Name:  "rap-conformance-" + r.Suite,
		Tests: len(r.Results), Failures: r.Count(Fail, ""), Skipped: r.Count(Skip, ""),
		Time: seconds(r.Duration),
	}
	for _, res := range r.Results {
		c := junitCase{Name: res.ID, Classname: "rap.conformance." + r.Suite + "." + strings.ToLower(string(res.Level)), Time: seconds(res.Duration)}
		switch res.Status {
		case Fail:
			var text strings.Builder
			fmt.Fprintf(&text, "%s\nfix: %s\nmore: %s\n", res.Rule, res.Fix, res.Link())
			for _, x := range res.Exchanges {
				text.WriteString("\n" + x.String())
			}
			c.Failure = &junitMessage{Message: res.Message, Type: string(res.Level), Text: text.String()}
		case Skip:
			c.Skipped = &junitMessage{Message: res.Message}
		default:
			c.SystemOut = res.Message
		}
		s.Cases = append(s.Cases, c)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(junitSuites{Suites: []junitSuite{s}}); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.3f", d.Seconds()) }

// errWriter keeps the first write error, so that a run of Fprintf calls
// needs one check at the end.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}
