package model_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/model/wiretest"
)

// NormalizeCached, with a cache filled the way the providers fill it (each
// stable turn added with ExtendFrom), gives the turns, stable count and
// starts that NormalizeStarts gives for the whole conversation, as it grows
// one message at a time: over random conversations, awkward ones, and ones
// where a call id comes back and its result is delivered again, which only
// the cached index of earlier results can tell from a new result.
func TestNormalizeCachedMatchesWhole(t *testing.T) {
	tails := 0
	for seed := uint64(0); seed < 300; seed++ {
		r := rand.New(rand.NewPCG(seed, 11))
		msgs := wiretest.RandomConversation(r)
		switch seed % 3 {
		case 1:
			msgs = wiretest.Awkward(msgs)
		case 2:
			msgs = withReusedCallID(msgs, r.IntN(len(msgs)+1))
		}
		w := &model.WireCache{}
		settled := 0
		for n := 1; n <= len(msgs); n++ {
			settled = max(settled, n-r.IntN(3))
			req := model.Request{Messages: msgs[:n], Settled: settled, SettledSeq: int64(settled), Wire: w}
			want, wantStable, wantStarts, wantErr := model.NormalizeStarts(msgs[:n], settled)
			w.Lock()
			turns, base, stable, starts, err := model.NormalizeCached(req, w, "k")
			if (err != nil) != (wantErr != nil) {
				w.Unlock()
				t.Fatalf("seed %d, %d messages: error %v, want %v", seed, n, err, wantErr)
			}
			if err != nil {
				w.Unlock()
				continue
			}
			if base > 0 {
				tails++
			}
			if stable != wantStable || !reflect.DeepEqual(turns, want[base:]) || !reflect.DeepEqual(starts, wantStarts[base:]) {
				w.Unlock()
				t.Fatalf("seed %d, %d messages (settled %d), from turn %d: differs\ncached: stable %d starts %v %+v\nwhole:  stable %d starts %v %+v",
					seed, n, settled, base, stable, starts, turns, wantStable, wantStarts[base:], want[base:])
			}
			// Fill the cache as a provider does.
			_, ends := w.Prefix("k", stable, int64(settled))
			for i := len(ends); i < stable; i++ {
				if !w.ExtendFrom([]byte(fmt.Sprint(i)), int64(settled), starts[i-base]) {
					break
				}
			}
			w.Unlock()
		}
	}
	if tails < 1000 {
		t.Errorf("only %d completions normalised from a cached turn: the test does not exercise the cache", tails)
	}
}

// withReusedCallID inserts at i a call whose id is then called again, each
// answered with the same result: the second result is a redelivery of the
// first (RAP RE-6) and is dropped, whichever turn it falls in.
func withReusedCallID(msgs []model.Message, i int) []model.Message {
	args := json.RawMessage(`{}`)
	call := model.Message{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "again", Name: "tool", Arguments: args}}}
	result := model.Message{Role: model.RoleUser, ToolResults: []model.ToolResult{{CallID: "again", Text: "same"}}}
	out := append([]model.Message(nil), msgs[:i]...)
	if i > 0 && out[i-1].Role == model.RoleAssistant {
		out = append(out, model.Message{Role: model.RoleUser, Text: "next"})
	}
	out = append(out, call, result, model.Message{Role: model.RoleAssistant, Text: "and again"},
		model.Message{Role: model.RoleUser, Text: "go on"}, call, result, model.Message{Role: model.RoleAssistant, Text: "done"})
	if i < len(msgs) && msgs[i].Role == model.RoleAssistant {
		out = append(out, model.Message{Role: model.RoleUser, Text: "more"})
	}
	return append(out, msgs[i:]...)
}

// BenchmarkNormalizeCached normalises the request of one more completion of
// a conversation whose earlier turns are cached, at two history lengths:
// the work should not grow with the history.
func BenchmarkNormalizeCached(b *testing.B) {
	for _, calls := range []int{50, 1000} {
		b.Run(fmt.Sprintf("calls=%d", calls), func(b *testing.B) {
			args := json.RawMessage(`{}`)
			msgs := []model.Message{{Role: model.RoleUser, Text: "start"}}
			for i := range calls {
				id := fmt.Sprintf("toolu_%012d", i)
				msgs = append(msgs,
					model.Message{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: id, Name: "tool", Arguments: args}}},
					model.Message{Role: model.RoleUser, ToolResults: []model.ToolResult{{CallID: id, Text: "ok"}}})
			}
			settled := len(msgs) - 1
			req := model.Request{Messages: msgs, Settled: settled, SettledSeq: int64(settled), Wire: &model.WireCache{Limit: 1 << 30}}
			w := req.Wire
			fill := func() {
				w.Lock()
				defer w.Unlock()
				_, base, stable, starts, err := model.NormalizeCached(req, w, "k")
				if err != nil {
					b.Fatal(err)
				}
				_, ends := w.Prefix("k", stable, req.SettledSeq)
				for i := len(ends); i < stable; i++ {
					w.ExtendFrom([]byte("x"), req.SettledSeq, starts[i-base])
				}
			}
			fill()
			b.ReportAllocs()
			for b.Loop() {
				w.Lock()
				if _, base, _, _, err := model.NormalizeCached(req, w, "k"); err != nil || base == 0 {
					b.Fatalf("base %d, %v: the cache was not used", base, err)
				}
				w.Unlock()
			}
		})
	}
}
