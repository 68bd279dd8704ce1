package openai

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3/packages/ssestream"
)

// sseEvents are events of a Chat Completions stream, as "event:" and
// "data:" lines without the blank line that ends each: chunks, the end,
// the errors a server may send instead, and odd events.
var sseEvents = []string{
	"data: [DONE]",
	"data: [DONE] and more",
	`data: {"error":{"message":"overloaded","type":"server_error"}}`,
	`data: {"choices":[{"index":0,"delta":{"content":"x"}}],"error":null}`,
	`data: {"error":"plain"}`,
	`data: {"Error":{"message":"case"}}`,
	`data: {"err\u006fr":{"message":"escaped"}}`,
	`data: {"choices":5,"error":{"message":"both"}}`,
	`data: {"a":{"error":1}}`,
	`data: [{"error":1}]`,
	"event: error\ndata: {\"message\":\"typed error\"}",
	"event: thread.run\ndata: {\"id\":\"r\"}",
	"event: thread.run\ndata: {not json",
	"event: thread.message.delta\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"wrapped\"}}]}",
	"event: other\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"typed\"}}]}",
	"data: {\"choices\":[{\"index\":0,\n\"delta\":{\"content\":\"two lines\"}}]}",
	"data: {\"choices\":\ndata: [{\"index\":0,\"finish_reason\":\"stop\"}]}",
	": a comment",
	"data:{\"choices\":[]}",
	"data: ",
	"data: not json",
	`data: {"choices":[{"index":0`,
	"data: null",
	`data: {"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2}}`,
}

// sseBody joins events into a response body.
func sseBody(events []string) string {
	var b strings.Builder
	for _, e := range events {
		b.WriteString(e)
		b.WriteString("\n\n")
	}
	return b.String()
}

func sseResponse(body string) *http.Response {
	return &http.Response{
		StatusCode: 200,
		Header:     http.Header{"Content-Type": {"text/event-stream"}},
		Body:       io.NopCloser(strings.NewReader(body)),
	}
}

// readBoth reads body with chunkStream and with ssestream.Stream[chunk],
// as Complete did before, and fails unless both give the same chunks and
// end with the same error.
func readBoth(t *testing.T, body string) {
	t.Helper()
	var got []chunk
	cs := chunkStream{events: ssestream.NewDecoder(sseResponse(body))}
	var c chunk
	for cs.next(&c) {
		got = append(got, c)
	}
	var want []chunk
	st := ssestream.NewStream[chunk](ssestream.NewDecoder(sseResponse(body)), nil)
	for st.Next() {
		want = append(want, st.Current())
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("body %q:\n got %+v\nwant %+v", body, got, want)
	}
	if g, w := fmt.Sprintf("%T %v", cs.err, cs.err), fmt.Sprintf("%T %v", st.Err(), st.Err()); g != w {
		t.Fatalf("body %q: error\n %s\nwant\n %s", body, g, w)
	}
	var gotSE, wantSE *ssestream.StreamError
	if errors.As(cs.err, &gotSE) && errors.As(st.Err(), &wantSE) && !reflect.DeepEqual(gotSE, wantSE) {
		t.Fatalf("body %q: stream error %+v, want %+v", body, gotSE, wantSE)
	}
	if cs.next(&c) {
		t.Fatalf("body %q: a chunk after the end", body)
	}
}

// TestChunkStreamAgreesWithSSEStream: chunkStream yields the chunks and
// the error ssestream.Stream yields, for each event alone, after a chunk,
// and in random sequences of events and corpus chunks.
func TestChunkStreamAgreesWithSSEStream(t *testing.T) {
	first := "data: " + chunkSamples[1]
	for _, e := range sseEvents {
		readBoth(t, sseBody([]string{e}))
		readBoth(t, sseBody([]string{first, e, first}))
	}
	for _, s := range chunkCorpus {
		if !strings.Contains(s, "\n") {
			readBoth(t, sseBody([]string{first, "data: " + s, first}))
		}
	}
	readBoth(t, "")
	readBoth(t, "data: "+chunkSamples[1]) // no blank line at the end
	r := rand.New(rand.NewPCG(9, 10))
	for range 2000 {
		var events []string
		for range 1 + r.IntN(6) {
			if r.IntN(3) == 0 {
				events = append(events, sseEvents[r.IntN(len(sseEvents))])
			} else {
				events = append(events, "data: "+string(randomChunk(r)))
			}
		}
		readBoth(t, sseBody(events))
	}
	// A stream with no body reads as empty, as before.
	cs := chunkStream{events: ssestream.NewDecoder(nil)}
	if cs.next(new(chunk)) || cs.err != nil {
		t.Errorf("a nil decoder: a chunk or an error (%v)", cs.err)
	}
}

// FuzzChunkStream compares chunkStream with ssestream.Stream on any
// response body.
func FuzzChunkStream(f *testing.F) {
	for _, e := range sseEvents {
		f.Add(sseBody([]string{"data: " + chunkSamples[2], e}))
	}
	f.Fuzz(func(t *testing.T, body string) { readBoth(t, body) })
}
