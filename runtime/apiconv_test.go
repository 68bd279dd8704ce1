package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/store"
)

// Every conversion of apiconv.go, given a record with every field set (each
// to a value of its own), returns an api value with every exported field
// set, to the value of the record's field of the same name; and every
// exported field of the record has its field in the api type, unless it is
// listed as not shown. So a field added to a record and to its api type
// but forgotten in the conversion, or added to a record without deciding
// whether the API shows it, fails here.
func TestAPIConversionsCopyEveryField(t *testing.T) {
	// A session's first message is shown as the title derived from it.
	checkConversion(t, apiThread, "FirstMessage")
	// A turn's usage is shown summed, in the thread's state.
	checkConversion(t, apiMessage, "Usage")
	checkConversion(t, apiToolCall)
	checkConversion(t, apiToolResult)
	checkConversion(t, apiCall)
	checkConversion(t, apiSubscription)
	// The response URL may hold a key: the API never shows it.
	// A choice has no fields: a record with fields is a user input, shown
	// by apiInput (inputs.go) as api.Input.
	checkConversion(t, apiChoice, "ResponseURL", "Fields")
}

// checkConversion checks conv as TestAPIConversionsCopyEveryField says;
// hidden are the fields of S the API does not show.
func checkConversion[S, A any](t *testing.T, conv func(S) A, hidden ...string) {
	t.Helper()
	st, at := reflect.TypeFor[S](), reflect.TypeFor[A]()
	var rec S
	n := 0
	fillRecord(reflect.ValueOf(&rec).Elem(), &n)
	got := reflect.ValueOf(conv(rec))
	for _, path := range unsetFields(got, at.Name()) {
		t.Errorf("%s leaves %s unset: copy it from the record in apiconv.go", at, path)
	}
	for i := range at.NumField() {
		f := at.Field(i)
		sf, ok := st.FieldByName(f.Name)
		if !ok {
			continue // a field of the API's own
		}
		if !sameValue(got.Field(i), reflect.ValueOf(rec).FieldByIndex(sf.Index)) {
			t.Errorf("%s.%s = %v, but the record's %s is %v", at, f.Name, got.Field(i), f.Name, reflect.ValueOf(rec).FieldByIndex(sf.Index))
		}
	}
	for i := range st.NumField() {
		f := st.Field(i)
		if !f.IsExported() || slices.Contains(hidden, f.Name) {
			continue
		}
		if _, ok := at.FieldByName(f.Name); !ok {
			t.Errorf("%s.%s has no field in %s: add it there and to the conversion in apiconv.go, or list it as not shown", st, f.Name, at)
		}
	}
}

// fillRecord sets every exported field of v, recursively, to a value no
// other field has: *n counts the values given.
func fillRecord(v reflect.Value, n *int) {
	*n++
	switch {
	case v.Type() == reflect.TypeFor[time.Time]():
		v.Set(reflect.ValueOf(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).Add(time.Duration(*n) * time.Second)))
		return
	case v.Type() == reflect.TypeFor[json.RawMessage]():
		v.SetBytes(fmt.Appendf(nil, `{"n":%d}`, *n))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(fmt.Sprintf("v%d", *n))
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(int64(*n))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		fillRecord(s.Index(0), n)
		fillRecord(s.Index(1), n)
		v.Set(s)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fillRecord(v.Field(i), n)
			}
		}
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fillRecord(p.Elem(), n)
		v.Set(p)
	default:
		panic(fmt.Sprintf("fillRecord: no value for a %s", v.Type()))
	}
}

// unsetFields returns the paths of the exported fields of v, recursively
// (into slice elements too), whose value is zero.
func unsetFields(v reflect.Value, path string) []string {
	switch v.Kind() {
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			break
		}
		var out []string
		for i := range v.NumField() {
			if f := v.Type().Field(i); f.IsExported() {
				out = append(out, unsetFields(v.Field(i), path+"."+f.Name)...)
			}
		}
		return out
	case reflect.Slice:
		if v.Len() == 0 {
			return []string{path}
		}
		var out []string
		for i := range v.Len() {
			out = append(out, unsetFields(v.Index(i), fmt.Sprintf("%s[%d]", path, i))...)
		}
		return out
	}
	if v.IsZero() {
		return []string{path}
	}
	return nil
}

// sameValue reports whether the api value a holds what the record value r
// holds: equal when of one type; else the same string of a string type
// (Role, states), element by element for slices, and field by field (a's
// fields) for structs.
func sameValue(a, r reflect.Value) bool {
	if a.Type() == r.Type() {
		return reflect.DeepEqual(a.Interface(), r.Interface())
	}
	switch a.Kind() {
	case reflect.String:
		return r.Kind() == reflect.String && a.String() == r.String()
	case reflect.Slice:
		if r.Kind() != reflect.Slice || a.Len() != r.Len() {
			return false
		}
		for i := range a.Len() {
			if !sameValue(a.Index(i), r.Index(i)) {
				return false
			}
		}
		return true
	case reflect.Struct:
		if r.Kind() != reflect.Struct {
			return false
		}
		for i := range a.NumField() {
			rf := r.FieldByName(a.Type().Field(i).Name)
			if !rf.IsValid() || !sameValue(a.Field(i), rf) {
				return false
			}
		}
		return true
	}
	return false
}

// apiSlice keeps nil and empty apart, so that the JSON (null or []) of a
// converted list stays what it was.
func TestAPISliceKeepsNilAndEmptyApart(t *testing.T) {
	if got := apiSlice([]store.Choice(nil), apiChoice); got != nil {
		t.Errorf("nil converts to %#v, want nil", got)
	}
	if got := apiSlice([]store.Choice{}, apiChoice); got == nil || len(got) != 0 {
		t.Errorf("empty converts to %#v, want an empty slice", got)
	}
}

// The Go API returns what the store holds, converted: History, Threads
// and PendingChoices.
func TestGoAPIReturnsStoredRecordsConverted(t *testing.T) {
	e := newEnv(t, envOptions{turns: []scripted.Turn{{Text: "ok", Repeat: true}}})
	th := e.newThread()
	e.post(th, "hello")
	e.idle(th)
	ctx := context.Background()
	if err := e.rt.store.Update(ctx, func(tx store.Tx) error {
		return tx.PutChoice(store.Choice{ThreadID: th, CallID: "call-1", ToolName: "pick", Prompt: "Which?",
			Choices: []string{"x", "y"}, Default: 1, ResponseURL: "http://tool.example/answer?key=secret"})
	}); err != nil {
		t.Fatal(err)
	}
	var history []store.Message
	var threads []store.Thread
	var choices []store.Choice
	if err := e.rt.store.View(ctx, func(tx store.Tx) error {
		var err error
		if history, err = tx.History(th); err != nil {
			return err
		}
		if threads, err = tx.ListThreads(); err != nil {
			return err
		}
		choices, err = tx.ThreadChoices(th)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	gotHistory, err := e.rt.History(ctx, th)
	if err != nil {
		t.Fatal(err)
	}
	if want := apiSlice(history, apiMessage); len(want) < 2 || !reflect.DeepEqual(gotHistory, want) {
		t.Errorf("History = %+v, want %+v", gotHistory, want)
	}
	gotThreads, err := e.rt.Threads(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := apiSlice(threads, apiThread); len(want) != 1 || !reflect.DeepEqual(gotThreads, want) {
		t.Errorf("Threads = %+v, want %+v", gotThreads, want)
	}
	gotChoices, err := e.rt.PendingChoices(ctx, th)
	if err != nil {
		t.Fatal(err)
	}
	if want := []api.Choice{apiChoice(choices[0])}; len(choices) != 1 || !reflect.DeepEqual(gotChoices, want) {
		t.Errorf("PendingChoices = %+v, want %+v", gotChoices, want)
	}
}
