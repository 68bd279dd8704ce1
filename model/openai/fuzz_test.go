package openai_test

import (
	"testing"

	"github.com/gorap/gorap/model/wiretest"
)

// FuzzConversation checks, with the fuzz test shared by every provider,
// that any conversation shape goes out as one the API accepts, that no text
// is lost, and that image bytes never reach a model without image input
// (RAP RE-2).
func FuzzConversation(f *testing.F) { wiretest.FuzzConversation(f, harness) }
