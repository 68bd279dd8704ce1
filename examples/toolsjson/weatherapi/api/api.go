// Package api is the made-up weather API of the tools.json example.
package api

import (
	"crypto/subtle"
	"encoding/json"
	"hash/fnv"
	"net/http"
	"strings"
)

// Handler serves GET /weather/{city}?units=metric|imperial to callers
// presenting "Authorization: Bearer key".
func Handler(key string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /weather/{city}", func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), []byte("Bearer "+key)) != 1 {
			http.Error(w, `{"error":"wrong or missing API key"}`, http.StatusUnauthorized)
			return
		}
		city := r.PathValue("city")
		if strings.EqualFold(city, "atlantis") {
			http.Error(w, `{"error":"no such city"}`, http.StatusNotFound)
			return
		}
		h := fnv.New32a()
		h.Write([]byte(strings.ToLower(city)))
		c := float64(h.Sum32()%350)/10 - 5
		units := r.URL.Query().Get("units")
		t := c
		if units == "imperial" {
			t = c*9/5 + 32
		} else {
			units = "metric"
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"city": city, "temperature": t, "units": units})
	})
	return mux
}
