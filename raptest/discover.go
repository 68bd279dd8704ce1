package raptest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/gorap/gorap/rap"
)

// fetchToolset GETs the discovery document of baseURL and decodes it.
func fetchToolset(ctx context.Context, client *http.Client, baseURL string) (*rap.Toolset, error) {
	u := joinURL(baseURL, rap.WellKnownPath)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("raptest: discovery URL %q: %w", u, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("raptest: discovering %s: %w", u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxToolsetBytes+1))
	if err != nil {
		return nil, fmt.Errorf("raptest: reading %s: %w", u, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, &StatusError{URL: u, Status: resp.StatusCode, Body: string(body[:min(len(body), maxErrorBody)])}
	}
	if len(body) > maxToolsetBytes {
		return nil, fmt.Errorf("raptest: %s: toolset is larger than %d bytes", u, maxToolsetBytes)
	}
	var ts rap.Toolset
	if err := json.Unmarshal(body, &ts); err != nil {
		return nil, fmt.Errorf("raptest: %s: not a toolset: %w", u, err)
	}
	return &ts, nil
}
