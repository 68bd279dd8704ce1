package anthropic

import (
	"context"
	"fmt"

	sdk "github.com/anthropics/anthropic-sdk-go"

	"github.com/gorap/gorap/model"
)

// CountTokens implements model.TokenCounter with the Messages API's token
// counting endpoint (POST /v1/messages/count_tokens): the input tokens
// req would take, counted by Anthropic for the provider's model. It costs
// a request, so the runtime asks only near the context window.
func (p *Provider) CountTokens(ctx context.Context, req model.Request) (_ int, err error) {
	defer func() { err = model.RedactError(err, p.key) }()
	params, err := p.params(req)
	if err != nil {
		return 0, err
	}
	count := sdk.MessageCountTokensParams{Model: params.Model, Messages: params.Messages}
	if len(params.System) > 0 {
		count.System.OfTextBlockArray = params.System
	}
	for _, t := range params.Tools {
		count.Tools = append(count.Tools, sdk.MessageCountTokensToolUnionParam{OfTool: t.OfTool})
	}
	res, err := p.client.Messages.CountTokens(ctx, count)
	if err != nil {
		return 0, fmt.Errorf("anthropic: count the tokens of a request: %w", p.describe(ctx, err))
	}
	return int(res.InputTokens), nil
}
