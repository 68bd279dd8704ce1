package termchat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/client"
)

// clientAPI implements API with the runtime's typed Go client
// (runtime/client); its event stream resumes by event id after a
// disconnection, so no event is lost or shown twice.
type clientAPI struct{ c *client.Client }

// NewHTTPAPI returns the API of the runtime at base, such as
// http://127.0.0.1:8080, sending token as its bearer token when set.
func NewHTTPAPI(base, token string) (API, error) {
	var opts []client.Option
	if token != "" {
		opts = append(opts, client.WithToken(token))
	}
	c, err := client.New(base, opts...)
	if err != nil {
		return nil, err
	}
	return clientAPI{c}, nil
}

// CreateThread implements API.
func (a clientAPI) CreateThread(ctx context.Context) (*Created, error) {
	r, err := a.c.CreateThread(ctx, api.CreateThreadRequest{})
	if err != nil {
		return nil, err
	}
	out := &Created{ID: r.ID}
	if r.Toolsets != nil {
		// The toolsets' JSON is the same as Created's.
		b, _ := json.Marshal(r.Toolsets)
		_ = json.Unmarshal(b, &out.Toolsets)
	}
	return out, nil
}

// PostMessage implements API.
func (a clientAPI) PostMessage(ctx context.Context, threadID, text string) error {
	_, err := a.c.PostMessage(ctx, threadID, text)
	return err
}

// History implements API.
func (a clientAPI) History(ctx context.Context, threadID string) ([]api.Message, error) {
	return a.c.History(ctx, threadID)
}

// Events implements API: the stream reconnects by itself, resuming after
// the last event it delivered.
func (a clientAPI) Events(ctx context.Context, threadID string) (<-chan Event, func() error, error) {
	s, err := a.c.Events(ctx, threadID, client.StreamOptions{})
	if err != nil {
		return nil, nil, err
	}
	ch := make(chan Event, 64)
	done := make(chan struct{})
	var streamErr error
	go func() {
		defer close(done)
		defer close(ch)
		defer s.Close()
		for {
			ev, err := s.Next()
			if err != nil {
				streamErr = err
				return
			}
			select {
			case ch <- Event{Type: ev.Type, Data: ev.Data}:
			case <-ctx.Done():
				return
			}
		}
	}()
	errf := func() error {
		<-done
		if ctx.Err() != nil {
			return nil
		}
		return streamErr
	}
	return ch, errf, nil
}

// AnswerChoice implements API.
func (a clientAPI) AnswerChoice(ctx context.Context, threadID, callID string, selected *int) error {
	if selected == nil {
		_, err := a.c.DismissChoice(ctx, threadID, callID)
		return err
	}
	_, err := a.c.AnswerChoice(ctx, threadID, callID, *selected)
	return err
}

// AnswerInput implements API.
func (a clientAPI) AnswerInput(ctx context.Context, threadID, callID string, values map[string]json.RawMessage, dismiss bool) error {
	if dismiss {
		_, err := a.c.DismissInput(ctx, threadID, callID)
		return err
	}
	_, err := a.c.AnswerInput(ctx, threadID, callID, values)
	return err
}

// Status implements API.
func (a clientAPI) Status(ctx context.Context, threadID string) (*ThreadStatus, error) {
	info, err := a.c.Thread(ctx, threadID)
	if err != nil {
		return nil, err
	}
	// ThreadStatus is the part of the answer the chat uses, by JSON name.
	b, err := json.Marshal(info)
	if err != nil {
		return nil, err
	}
	var st ThreadStatus
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("GET /v1/threads/%s: %w", threadID, err)
	}
	return &st, nil
}

// Threads implements API.
func (a clientAPI) Threads(ctx context.Context, parent string) ([]api.Thread, error) {
	if parent != "" {
		return a.c.Children(ctx, parent)
	}
	var out []api.Thread
	for t, err := range a.c.Threads(ctx, client.ListOptions{Limit: 1000}) {
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// StatusOf returns the HTTP status of a refusal of the runtime in err's
// chain, or 0.
func StatusOf(err error) int {
	var ce *client.Error
	if errors.As(err, &ce) {
		return ce.Status
	}
	return 0
}
