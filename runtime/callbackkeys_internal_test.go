package runtime

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"sync"
	"testing"
)

// macWith reuses keyed HMAC states; every MAC must still be the one a
// fresh HMAC computes, whatever key was used before and from however many
// goroutines (RAP TR-7: the MAC is what authenticates a callback).
func TestMacWithMatchesFreshHMAC(t *testing.T) {
	fresh := func(key []byte, thread, call string) []byte {
		m := hmac.New(sha256.New, key)
		m.Write([]byte("gorap-callback-v1\x00" + thread + "\x00" + call))
		return m.Sum(nil)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 100)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				key := []byte(fmt.Sprintf("key-%d", (g+i)%11)) // more keys than the pool map keeps
				thread, call := fmt.Sprintf("t%d", i), fmt.Sprintf("c%d", g)
				if got, want := macWith(key, thread, call), fresh(key, thread, call); !bytes.Equal(got, want) {
					select {
					case errs <- fmt.Sprintf("key %s, %s/%s: got %x, want %x", key, thread, call, got, want):
					default:
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
