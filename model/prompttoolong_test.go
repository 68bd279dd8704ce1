package model

import (
	"errors"
	"fmt"
	"testing"
)

// The providers' messages for a prompt over the window are recognised, and
// nothing else is.
func TestIsPromptTooLong(t *testing.T) {
	for _, msg := range []string{
		`POST "https://api.anthropic.com/v1/messages": 400 Bad Request {"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 215031 tokens > 200000 maximum"}}`,
		`POST "https://api.openai.com/v1/chat/completions": 400 Bad Request {"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens.","code":"context_length_exceeded"}}`,
	} {
		if !IsPromptTooLong(errors.New(msg)) {
			t.Errorf("not recognised as too long: %s", msg)
		}
	}
	if !IsPromptTooLong(fmt.Errorf("wrapped: %w", ErrPromptTooLong)) {
		t.Error("ErrPromptTooLong wrapped is not recognised")
	}
	for _, err := range []error{nil, errors.New("429 Too Many Requests"), errors.New("invalid x-api-key"),
		errors.New("429: Number of request tokens has exceeded your per-minute rate limit")} {
		if IsPromptTooLong(err) {
			t.Errorf("%v recognised as a prompt too long", err)
		}
	}
}
