package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/runtime/store"
)

// TestSharedEventsCarriedInOrder: client events published while the
// runtime's transactions carry some of them and the writer stores the
// rest are stored each once, in the order they were published.
func TestSharedEventsCarriedInOrder(t *testing.T) {
	e := newEnv(t, envOptions{postgres: true, turns: []scripted.Turn{{Text: "ok", Repeat: true}}})
	const n = 300
	threads := []string{"carried-a", "carried-b"}
	stop := make(chan struct{})
	var carriers sync.WaitGroup
	carriers.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := e.rt.coord.update(context.Background(), func(store.Tx) error { return nil }); err != nil {
				t.Error(err)
				return
			}
			time.Sleep(time.Duration(len(threads)) * time.Millisecond)
		}
	})
	for i := 1; i <= n; i++ {
		for _, th := range threads {
			e.rt.hub.publish(Event{Type: EventStatus, ThreadID: th, Data: json.RawMessage(strconv.Itoa(i))})
		}
		if i%7 == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	close(stop)
	carriers.Wait()
	for _, th := range threads {
		var evs []store.ThreadEvent
		poll(t, "every event of "+th+" stored", func() bool {
			e.rt.store.View(context.Background(), func(tx store.Tx) error {
				evs, _ = tx.ThreadEventsAfter(th, 0, 2*n)
				return nil
			})
			return len(evs) >= n
		})
		if len(evs) != n {
			t.Fatalf("%s: %d events stored, want %d", th, len(evs), n)
		}
		for i, ev := range evs {
			if want := fmt.Sprint(i + 1); string(ev.Data) != want || ev.ID != int64(i+1) {
				t.Fatalf("%s: stored event %d is %s with id %d, want %s with id %d", th, i, ev.Data, ev.ID, want, i+1)
			}
		}
	}
}
