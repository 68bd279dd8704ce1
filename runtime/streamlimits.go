package runtime

// This file owns the bounds of the event streams (StreamLimits) with their
// defaults; the HTTP server itself is runtime/httpapi's (NewHTTPServer).

import (
	"time"

	"github.com/gorap/gorap/runtime/httpapi"
)

// StreamLimits bounds the client API's event streams (GET
// /v1/threads/{id}/events). Zero fields take the defaults below.
type StreamLimits struct {
	// BufferBytes bounds the events queued for one subscriber (an event
	// stream or a Subscribe channel) that has not taken them yet; one that
	// falls further behind is dropped and its memory freed. Default 4 MiB.
	BufferBytes int
	// TotalBufferBytes bounds the events queued over every subscriber:
	// past it, a subscriber that is behind is dropped rather than queue
	// more. Default 256 MiB.
	TotalBufferBytes int
	// WriteTimeout bounds each write of an event to a stream's client; a
	// client that does not read for that long is disconnected. Default 30 s.
	WriteTimeout time.Duration
	// PerThread is the most concurrent event streams of one thread; one
	// more is answered 429 Too Many Requests. Default 64.
	PerThread int
	// Total is the most concurrent event streams of the runtime; one more
	// is answered 503 Service Unavailable. Default 1536, which leaves 512
	// of rap.DefaultMaxConns connections for other requests.
	Total int
	// ResumeBytes bounds the recent events kept per thread so that a
	// client that reconnects with Last-Event-ID gets exactly the events it
	// missed; one whose id has left this buffer gets a full replay flagged
	// as a reset. Default 1 MiB.
	ResumeBytes int
	// ResumeTotalBytes bounds the resume buffers of all threads; past it
	// the least recently used buffers of threads nobody streams are
	// forgotten first. Default 64 MiB.
	ResumeTotalBytes int
}

// Defaults of StreamLimits.
const (
	DefaultStreamBufferBytes  = 4 << 20
	DefaultStreamTotalBytes   = 256 << 20
	DefaultStreamWriteTimeout = httpapi.DefaultStreamWriteTimeout
	DefaultStreamsPerThread   = 64
	DefaultStreamsTotal       = 1536
	DefaultResumeBytes        = 1 << 20
	DefaultResumeTotalBytes   = 64 << 20
)

func (l StreamLimits) withDefaults() StreamLimits {
	if l.BufferBytes <= 0 {
		l.BufferBytes = DefaultStreamBufferBytes
	}
	if l.TotalBufferBytes <= 0 {
		l.TotalBufferBytes = DefaultStreamTotalBytes
	}
	if l.WriteTimeout <= 0 {
		l.WriteTimeout = DefaultStreamWriteTimeout
	}
	if l.PerThread <= 0 {
		l.PerThread = DefaultStreamsPerThread
	}
	if l.Total <= 0 {
		l.Total = DefaultStreamsTotal
	}
	if l.ResumeBytes <= 0 {
		l.ResumeBytes = DefaultResumeBytes
	}
	if l.ResumeTotalBytes <= 0 {
		l.ResumeTotalBytes = DefaultResumeTotalBytes
	}
	return l
}
