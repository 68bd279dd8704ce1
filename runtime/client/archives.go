package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/gorap/gorap/internal/bearer"
	"github.com/gorap/gorap/runtime/archive"
)

// Export writes a session archive (runtime/archive) of the sessions whose
// root thread ids are given to w, or of every session the client's token
// may see when none is given. The archive is checked as it arrives: one
// the runtime cut short is an error, never a silently shorter file.
func (c *Client) Export(ctx context.Context, w io.Writer, roots ...string) error {
	path := "/v1/export"
	if len(roots) > 0 {
		path += "?" + url.Values{"session": roots}.Encode()
	}
	req, err := c.request(ctx, http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	resp, err := c.send(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return statusError(http.MethodGet, "/v1/export", resp)
	}
	// Read the archive through, so that a stream cut short is an error
	// here, and copy it as it is.
	ar, err := archive.NewReader(io.TeeReader(resp.Body, w))
	if err != nil {
		return fmt.Errorf("GET /v1/export: %w", err)
	}
	for {
		_, err := ar.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("GET /v1/export: %w", err)
		}
	}
}

// ImportResult is the answer to Import.
type ImportResult struct {
	// Imported are the root thread ids of the sessions imported.
	Imported []string `json:"imported"`
}

// Import sends the session archive rd to the runtime, which imports its
// sessions one by one. It returns the ids of the sessions imported, also
// with an error: those imported before the one that failed stay
// imported.
func (c *Client) Import(ctx context.Context, rd io.Reader) ([]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/v1/import", rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/jsonl")
	if c.token != "" {
		bearer.Set(req.Header, c.token)
	}
	resp, err := c.send(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out struct {
		Imported []string `json:"imported"`
		Error    string   `json:"error"`
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	_ = json.Unmarshal(body, &out)
	if resp.StatusCode != http.StatusOK {
		msg := out.Error
		if msg == "" {
			msg = string(body)
		}
		return out.Imported, &Error{Method: http.MethodPost, Path: "/v1/import", Status: resp.StatusCode, Message: msg}
	}
	return out.Imported, nil
}
