package runtime

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"strings"
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

// A callback token is the base64url thread id, call id and MAC joined by
// dots, and a callback URL is the public URL, the callback path and the
// token.
func TestCallbackTokenAndURLLayout(t *testing.T) {
	r := &Runtime{cfg: Config{PublicURL: "http://rt.example", Secret: []byte("0123456789abcdef0123456789abcdef")}}
	for _, ids := range [][2]string{{"thread-1", "call_1"}, {"t", "c"}, {"a-much-longer-thread-identifier-over-32-bytes", "call_with_a_long_id_too_0123456789"}} {
		th, c := ids[0], ids[1]
		want := b64.EncodeToString([]byte(th)) + "." + b64.EncodeToString([]byte(c)) + "." + b64.EncodeToString(r.tokenMAC(th, c))
		if got := r.callbackToken(th, c); got != want {
			t.Errorf("callbackToken(%q, %q) = %q, want %q", th, c, got, want)
		}
		if got := r.callbackURL(th, c); got != "http://rt.example"+CallbackPath+want {
			t.Errorf("callbackURL(%q, %q) = %q", th, c, got)
		}
		if gotT, gotC, err := r.verifyToken(r.callbackToken(th, c)); err != nil || gotT != th || gotC != c {
			t.Errorf("verifyToken of the token of (%q, %q) = %q, %q, %v", th, c, gotT, gotC, err)
		}
	}
}

// A token that is not exactly three non-empty base64url parts, or whose
// MAC does not match, is refused.
func TestMalformedTokensAreRefused(t *testing.T) {
	r := &Runtime{cfg: Config{Secret: []byte("0123456789abcdef0123456789abcdef")}}
	good := r.callbackToken("thread-1", "call_1")
	for _, tok := range []string{"", ".", "..", "...", good + ".", "." + good, good + ".x", "dGg.Y2E", "dGg..Y2E",
		good[:len(good)-2], "dGg!.Y2E.eHh4", strings.Replace(good, ".", "..", 1)} {
		if th, c, err := r.verifyToken(tok); err == nil {
			t.Errorf("verifyToken(%q) = %q, %q; want it refused", tok, th, c)
		}
	}
	if _, _, err := r.verifyToken(good); err != nil {
		t.Fatalf("a good token is refused: %v", err)
	}
}
