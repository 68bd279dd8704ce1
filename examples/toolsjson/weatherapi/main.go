// Command weatherapi is the HTTP API the example bundle's weather.lookup
// tool calls: GET /weather/{city}?units=metric|imperial with
// "Authorization: Bearer $DEMO_WEATHER_API_KEY". It makes the weather up.
//
//	DEMO_WEATHER_API_KEY=k go run ./examples/toolsjson/weatherapi   # listens on 127.0.0.1:8099
package main

import (
	"flag"
	"log"
	"net/http"
	"os"

	"github.com/gorap/gorap/examples/toolsjson/weatherapi/api"
)

func main() {
	addr := flag.String("listen", "127.0.0.1:8099", "address to listen on")
	flag.Parse()
	key := os.Getenv("DEMO_WEATHER_API_KEY")
	if key == "" {
		log.Fatal("set DEMO_WEATHER_API_KEY to the key the bundle's tool sends")
	}
	log.Printf("weather API on http://%s", *addr)
	log.Fatal(http.ListenAndServe(*addr, api.Handler(key)))
}
