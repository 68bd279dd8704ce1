package conformance

import (
	"encoding/json"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/gorap/gorap/runtime/api"
)

// The runtime checks of discovery and invocations.
var (
	checkRuntimeInvocationFields = Check{
		ID: "runtime.invocation.fields", Level: Must, Rule: "RAP IN-1, IN-2",
		Title: "an invocation has every field, of the right type",
		Fix:   "POST {operation, arguments, id, call_id, callback_url, group_id, user_id} with each member of the type IN-1 says",
	}
	checkRuntimeInvocationContentType = Check{
		ID: "runtime.invocation.content-type", Level: Must, Rule: "RAP TR-1",
		Title: "an invocation is sent as application/json",
		Fix:   "send invocations with Content-Type: application/json",
	}
	checkRuntimeDiscovery = Check{
		ID: "runtime.discovery.fetch", Level: Must, Rule: "RAP TS-4",
		Title: "the runtime discovers the toolset at /.well-known/rap-toolset",
		Fix:   "GET {base}/.well-known/rap-toolset (Accept: application/json) for each configured base URL",
	}
	checkRuntimeAncestors = Check{
		ID: "runtime.invocation.ancestors", Level: Must, Rule: "RAP IN-1, IN-2",
		Title: "a child thread's invocation lists its ancestors, root first",
		Fix:   "send thread_ancestors (root first, up to the parent) in every invocation made by a child thread",
	}
	checkRuntimeRetry = Check{
		ID: "runtime.dispatch.retry", Level: Must, Rule: "RAP TR-3",
		Title: "an invocation answered 503 is sent again",
		Fix:   "retry an invocation on connection errors and 5xx answers, with exponential backoff",
	}
	checkRuntimeRefused = Check{
		ID: "runtime.dispatch.refused", Level: Must, Rule: "RAP TR-3, TR-4",
		Title: "an invocation answered 400 is not retried and ends in an error result",
		Fix:   "treat a 4xx answer as final: do not retry, record an error tool result the model sees",
	}
)

func (r *runtimeRun) addInvocationChecks(s *Suite) {
	s.Add(checkRuntimeInvocationFields, r.checkInvocationFields)
	s.Add(checkRuntimeInvocationContentType, func(t *T) {
		t.Requires(checkRuntimeInvocationFields.ID)
		ct := r.fields.rec.Header.Get("Content-Type")
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			t.Failf("the invocation's Content-Type is %q", ct)
		}
	})
	s.Add(checkRuntimeDiscovery, func(t *T) {
		r.ready(t)
		rec, err := r.kit.await(t.Context(), 0, func(rec Received) bool { return rec.Kind == "discovery" })
		if err == nil {
			t.Record(rec.Exchange)
			return
		}
		t.Failf("the runtime never fetched %s/.well-known/rap-toolset: configure it with the toolset's base URL and start it after the kit", r.kit.URL())
	})
	s.Add(checkRuntimeAncestors, r.checkAncestors)
}

// addDispatchChecks adds the checks that refuse invocations; they run
// late, so that a runtime that stumbles on a refusal has shown the rest.
func (r *runtimeRun) addDispatchChecks(s *Suite) {
	s.Add(checkRuntimeRetry, func(t *T) {
		r.ready(t)
		r.kit.refuseNext("retry", http.StatusServiceUnavailable)
		from := r.kit.mark()
		c := r.call(t, "retry", EchoTool, false)
		if c.rec.Status != http.StatusServiceUnavailable {
			t.Failf("the kit could not answer the first invocation with 503")
		}
		again, err := r.kit.await(t.Context(), from, func(rec Received) bool {
			return rec.Kind == "invoke" && rec.Step == "retry" && rec.Status == http.StatusOK
		})
		if err != nil {
			t.Failf("the invocation answered 503 was never sent again")
		}
		t.Record(again.Exchange)
		if again.Invocation.ID != c.inv.ID {
			t.Logf("the retry has another id (%q, first %q)", again.Invocation.ID, c.inv.ID)
		}
		retried := &stepCall{conv: c.conv, inv: again.Invocation, rec: again}
		retried.sendOK(t, retried.result("retry done "+r.nonce))
	})
	s.Add(checkRuntimeRefused, func(t *T) {
		r.ready(t)
		r.kit.refuseNext("refused", http.StatusBadRequest, http.StatusBadRequest, http.StatusBadRequest)
		from := r.kit.mark()
		c := r.call(t, "refused", EchoTool, false)
		msgs, ok, err := r.waitHistory(t.Context(), c.conv, func(m []api.Message) bool { return hasErrorResult(m, c.inv.ID) })
		if err == errNoAPI {
			t.Skipf("%v", errNoAPI)
		}
		if !ok {
			t.Failf("the invocation answered 400 did not end in an error tool result (results seen: %q)", resultTexts(msgs))
		}
		if n := r.kit.count(from, invocationOf("refused")); n > 1 {
			t.Failf("the invocation answered 400 was sent %d times; a 4xx is final", n)
		}
	})
}

func (r *runtimeRun) checkInvocationFields(t *T) {
	c := r.call(t, "fields", EchoTool, false)
	inv := c.inv
	var problems []string
	need := func(name, kind string, nullable bool) {
		v, ok := inv.Raw[name]
		if !ok {
			if !nullable {
				problems = append(problems, name+" is missing")
			}
			return
		}
		s := strings.TrimSpace(string(v))
		switch {
		case s == "null" && nullable:
		case kind == "string" && (len(s) < 2 || s[0] != '"'):
			problems = append(problems, name+" is not a string: "+s)
		case kind == "object" && (len(s) < 2 || s[0] != '{'):
			problems = append(problems, name+" is not an object: "+s)
		}
	}
	need("operation", "string", false)
	need("arguments", "object", false)
	need("id", "string", false)
	need("call_id", "string", true)
	need("callback_url", "string", false)
	need("group_id", "string", false)
	need("user_id", "string", true)
	if inv.Operation != "" && inv.Operation != EchoTool {
		problems = append(problems, "operation is "+inv.Operation+", want "+EchoTool)
	}
	if inv.Arguments["step"] != "fields" {
		problems = append(problems, `arguments are not the model's {"step": "fields"}`)
	}
	if _, ok := inv.Raw["id"]; ok && inv.ID == "" {
		problems = append(problems, "id is empty")
	}
	if _, ok := inv.Raw["group_id"]; ok && inv.GroupID == "" {
		problems = append(problems, "group_id is empty")
	}
	if u, err := url.Parse(inv.CallbackURL); inv.CallbackURL != "" && (err != nil || !u.IsAbs() || (u.Scheme != "http" && u.Scheme != "https")) {
		problems = append(problems, "callback_url is not an absolute http(s) URL: "+inv.CallbackURL)
	}
	if len(inv.ThreadAncestors) > 0 {
		problems = append(problems, "thread_ancestors is set for a root conversation")
	}
	if len(problems) > 0 {
		t.Failf("%s", strings.Join(problems, "; "))
	}
	r.fields = c
}

func (r *runtimeRun) checkAncestors(t *T) {
	c := r.call(t, "child", EchoTool, true)
	inv := c.inv
	_, histErr := r.d.history(t.Context(), c.conv)
	if histErr != errNoAPI && inv.GroupID == c.conv {
		t.Skipf("the call came from the root thread %s: the runtime did not spawn a child thread", c.conv)
	}
	raw, ok := inv.Raw["thread_ancestors"]
	if !ok && histErr == errNoAPI {
		t.Skipf("the call has no thread_ancestors: either it did not come from a child thread (a runtime without child threads), or the runtime omits them (a failure); which cannot be seen without the /v1 API")
	}
	if !ok {
		t.Failf("the call came from a child thread without thread_ancestors")
	}
	var anc []string
	if err := json.Unmarshal(raw, &anc); err != nil || len(anc) == 0 {
		t.Failf("thread_ancestors is not a non-empty array of strings: %s", raw)
	}
	if slices.Contains(anc, inv.GroupID) {
		t.Failf("thread_ancestors %v contains the call's own group_id %q; it ends with the parent", anc, inv.GroupID)
	}
	if histErr != errNoAPI && anc[0] != c.conv {
		t.Failf("thread_ancestors %v does not start with the root thread %s", anc, c.conv)
	}
	c.sendOK(t, c.result("child done "+r.nonce))
}

// hasErrorResult reports whether msgs hold an error tool result of the
// call id (RAP RE-4).
func hasErrorResult(msgs []api.Message, id string) bool {
	for _, m := range msgs {
		for _, res := range m.ToolResults {
			if res.CallID == id && (res.IsError || strings.HasPrefix(res.Text, "Error")) {
				return true
			}
		}
	}
	return false
}
