package clientauth_test

import (
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/runtime"
	"github.com/gorap/gorap/runtime/clientauth"
	"github.com/gorap/gorap/runtime/store/sqlite"
)

// A program that embeds the runtime and serves its HTTP API puts the
// client API behind a token by giving the Authenticator's Handler as
// Config.ClientAuth: a request without the token gets 401, one with it is
// served. (Without ClientAuth the API would answer this machine only.)
func ExampleAuthenticator_Handler() {
	dir, _ := os.MkdirTemp("", "gorap-example")
	defer os.RemoveAll(dir)
	st, err := sqlite.Open(filepath.Join(dir, "rap.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	secret, err := runtime.LoadOrCreateSecret(dir)
	if err != nil {
		log.Fatal(err)
	}
	const token = "a-long-random-secret-from-your-vault"
	auth, err := clientauth.New(token, "", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer auth.Close()
	rt, err := runtime.New(&runtime.Config{
		Store:      st,
		Model:      scripted.New(nil),
		PublicURL:  "http://127.0.0.1:8080",
		Secret:     secret,
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		ClientAuth: auth.Handler,
	})
	if err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(rt.Handler())
	defer srv.Close()

	for _, bearer := range []string{"", token} {
		req, _ := http.NewRequest("GET", srv.URL+"/v1/threads", nil)
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		resp.Body.Close()
		fmt.Printf("token %v: %d\n", bearer != "", resp.StatusCode)
	}
	// Output:
	// token false: 401
	// token true: 200
}
