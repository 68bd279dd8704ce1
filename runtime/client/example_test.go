package client_test

import (
	"context"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/client"
)

// Chat with a runtime: create a thread, follow its events, send a message
// and print the conversation as it happens, until the thread is idle.
func Example() {
	rt := startRuntime(scripted.New([]scripted.Turn{{Text: "Hello! You said: {{last_user}}", Repeat: true}}), "s3cret")
	defer rt.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	c, err := client.New(rt.URL, client.WithToken("s3cret"))
	if err != nil {
		log.Fatal(err)
	}
	th, err := c.CreateThread(ctx, api.CreateThreadRequest{})
	if err != nil {
		log.Fatal(err)
	}
	s, err := c.Events(ctx, th.ID, client.StreamOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	sent := false
	for {
		ev, err := s.Next()
		if err != nil {
			log.Fatal(err)
		}
		switch p := ev.Payload.(type) {
		case *api.ReplayDone:
			// The thread's state is replayed: send the message now.
			fmt.Println("replayed:", p.Mode)
			if _, err := c.PostMessage(ctx, th.ID, "hi there"); err != nil {
				log.Fatal(err)
			}
			sent = true
		case *api.Message:
			fmt.Printf("%s: %s\n", p.Role, p.Text)
		case *api.Status:
			if sent && p.State == api.StateIdle {
				return
			}
		}
	}
	// Output:
	// replayed: replay
	// user: hi there
	// assistant: Hello! You said: hi there
}

// A client connecting to a thread that already has a conversation gets it
// replayed, then the replay_done marker, then live events.
func ExampleStream_replay() {
	rt := startRuntime(scripted.New([]scripted.Turn{{Text: "Noted: {{last_user}}", Repeat: true}}), "")
	defer rt.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, _ := client.New(rt.URL)
	th, _ := c.CreateThread(ctx, api.CreateThreadRequest{})
	c.PostMessage(ctx, th.ID, "milk")
	rt.RT.Idle(ctx, th.ID)

	s, err := c.Events(ctx, th.ID, client.StreamOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	for {
		ev, err := s.Next()
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(ev.Type)
		if ev.Type == api.EventReplayDone {
			break
		}
	}
	// Output:
	// toolsets
	// thread
	// message
	// message
	// replay_done
}

// Page through threads: ListThreads returns one page, Threads iterates over
// all of them.
func ExampleClient_Threads() {
	rt := startRuntime(scripted.New(nil), "")
	defer rt.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, _ := client.New(rt.URL)
	for range 5 {
		if _, err := c.CreateThread(ctx, api.CreateThreadRequest{UserID: "alice"}); err != nil {
			log.Fatal(err)
		}
	}
	page, _ := c.ListThreads(ctx, client.ListOptions{Limit: 2})
	fmt.Println("first page:", len(page.Threads), "more:", page.NextCursor != "")
	n := 0
	for t, err := range c.Threads(ctx, client.ListOptions{Limit: 2}) {
		if err != nil {
			log.Fatal(err)
		}
		if t.UserID == "alice" {
			n++
		}
	}
	fmt.Println("threads:", n)
	// Output:
	// first page: 2 more: true
	// threads: 5
}

// Errors say what happened: here, the runtime requires a client token and
// none was given.
func ExampleError() {
	rt := startRuntime(scripted.New(nil), "s3cret")
	defer rt.Stop()
	c, _ := client.New(rt.URL) // no token
	_, err := c.CreateThread(context.Background(), api.CreateThreadRequest{})
	fmt.Println(strings.SplitN(err.Error(), " (", 2)[0])
	// Output:
	// the runtime refused the client token
}
