// Package archive is gorap's session archive: one versioned, streaming
// file format that holds whole sessions (a root thread and its children,
// with everything the runtime keeps of them), independent of how a store
// keeps its records. rap export writes it, rap import reads it, and a
// session moving from one runtime to another travels in it.
//
// An archive is JSON Lines (one JSON object per line, UTF-8). The first
// line is the header, which names the format and its version; then come
// the sessions, each a "session" line, its records, and a "session_end"
// line that counts them; the last line is "end", which counts the
// sessions. A reader therefore knows when a file was cut short. Every
// record line has a "type" and the fields of that type; a reader refuses a
// type or a version it does not know rather than drop what it cannot
// read. docs/migration.md describes each record.
//
// An archive holds what tools need to reach the session (the response
// URLs of user choices, which may carry keys) and the conversations
// themselves: keep archive files private (Create makes them 0600).
//
// Write sessions with a Writer, read them with a Reader; ReadSession and
// WriteSession move one session between a store transaction and its
// archive form.
package archive
