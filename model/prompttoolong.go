package model

import (
	"errors"
	"strings"
)

// ErrPromptTooLong is wrapped by a provider's error for a request whose
// prompt does not fit the model's context window. IsPromptTooLong also
// recognises the providers' own messages for it.
var ErrPromptTooLong = errors.New("the prompt is too long for the model's context window")

// promptTooLongPhrases are what providers say when a prompt is over the
// window: Anthropic ("prompt is too long"), OpenAI and compatible servers
// ("context_length_exceeded", "maximum context length"). Phrases that rate
// limits use too ("too many tokens") are left out: a rate limit is retried,
// not compacted for.
var promptTooLongPhrases = []string{
	"prompt is too long",
	"context_length_exceeded",
	"maximum context length",
	"reduce the length of the messages",
}

// IsPromptTooLong reports whether err says that the request's prompt was
// over the model's context window.
func IsPromptTooLong(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrPromptTooLong) {
		return true
	}
	msg := strings.ToLower(err.Error())
	for _, p := range promptTooLongPhrases {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}
