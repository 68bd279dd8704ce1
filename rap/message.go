package rap

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// MessageType is the value of the "type" member of a callback message.
type MessageType string

// The five callback message types a tool may POST to a callback URL (RAP
// TR-5). gorap adds a sixth, TypeUserInput (userinput.go), for runtimes
// that list ExtensionUserInput.
const (
	TypeToolResult        MessageType = "tool_result"
	TypeSubscriptionEvent MessageType = "subscription_event"
	TypeOAuth             MessageType = "oauth"
	TypeUserChoice        MessageType = "user_choice"
	TypeViewUpdate        MessageType = "view_update"
)

// Invocation is what a runtime POSTs to a toolset's endpoint to run one
// operation (RAP IN-1).
type Invocation struct {
	// Operation is the tool name from the toolset.
	Operation string `json:"operation"`
	// Arguments is the JSON object of arguments for the tool.
	Arguments json.RawMessage `json:"arguments"`
	// ID identifies the tool call; every callback about it echoes it.
	ID string `json:"id"`
	// CallID is an optional secondary identifier, echoed when present.
	CallID string `json:"call_id,omitempty"`
	// CallbackURL is where the tool POSTs its callbacks. It is opaque.
	CallbackURL string `json:"callback_url"`
	// GroupID identifies the conversation thread.
	GroupID string `json:"group_id"`
	// ThreadAncestors lists ancestor thread ids from the root to the parent;
	// it is empty for a root thread.
	ThreadAncestors []string `json:"thread_ancestors,omitempty"`
	// UserID is the end user's identity, when the runtime knows it.
	UserID string `json:"user_id,omitempty"`
	// Extensions names the gorap extensions the runtime understands, such
	// as ExtensionUserInput. Not part of RAP: tools that do not know the
	// member ignore it, as they ignore every unknown member.
	Extensions []string `json:"extensions,omitempty"`
}

// MarshalJSON writes the invocation; absent Arguments are sent as {}, since
// "arguments" is a required object (RAP IN-1).
func (inv Invocation) MarshalJSON() ([]byte, error) {
	type plain Invocation
	p := plain(inv)
	if len(bytes.TrimSpace(p.Arguments)) == 0 {
		p.Arguments = json.RawMessage(`{}`)
	}
	return json.Marshal(p)
}

// DecodeInvocation parses an invocation strictly: a missing required field
// or a member of the wrong JSON type is an error that names the field.
// Unknown members are ignored.
func DecodeInvocation(data []byte) (*Invocation, error) {
	if inv, ok := decodeInvocationFast(data); ok {
		return inv, nil
	}
	return decodeInvocationStrict(data)
}

// decodeInvocationStrict is DecodeInvocation member by member, for the
// bodies decodeInvocationFast leaves to it.
func decodeInvocationStrict(data []byte) (*Invocation, error) {
	o, err := parseObject(data, "")
	if err != nil {
		return nil, err
	}
	inv := &Invocation{}
	if inv.Operation, err = o.nonEmpty("operation"); err != nil {
		return nil, err
	}
	if inv.Arguments, err = o.jsonObject("arguments", true); err != nil {
		return nil, err
	}
	if inv.ID, err = o.nonEmpty("id"); err != nil {
		return nil, err
	}
	if inv.CallID, err = o.str("call_id", false); err != nil {
		return nil, err
	}
	if inv.CallbackURL, err = o.nonEmpty("callback_url"); err != nil {
		return nil, err
	}
	if inv.GroupID, err = o.nonEmpty("group_id"); err != nil {
		return nil, err
	}
	if inv.ThreadAncestors, err = o.strings("thread_ancestors", false); err != nil {
		return nil, err
	}
	if len(inv.ThreadAncestors) == 0 {
		inv.ThreadAncestors = nil // [] and absent both mean a root thread
	}
	if inv.UserID, err = o.str("user_id", false); err != nil {
		return nil, err
	}
	if inv.Extensions, err = o.strings("extensions", false); err != nil {
		return nil, err
	}
	if len(inv.Extensions) == 0 {
		inv.Extensions = nil
	}
	return inv, nil
}

// Callback is any of the five messages a tool POSTs to a callback URL.
type Callback interface {
	// MessageType reports the message's "type" member.
	MessageType() MessageType
	// Thread reports the group_id the message is routed by.
	Thread() string
}

// ContentItem is one item of a multimodal tool result (RAP RE-2): either
// {type:"text", text} or {type:"image", data, mediaType}.
type ContentItem struct {
	// Type is "text" or "image".
	Type string `json:"type"`
	// Text is the text of a "text" item.
	Text string `json:"text,omitempty"`
	// Data is the base64-encoded bytes of an "image" item.
	Data string `json:"data,omitempty"`
	// MediaType is the MIME type of an "image" item, e.g. "image/png".
	MediaType string `json:"mediaType,omitempty"`
}

// MarshalJSON writes the members of the item's type: "text" always for a
// text item (even when empty), "data" and "mediaType" for an image.
func (c ContentItem) MarshalJSON() ([]byte, error) {
	switch c.Type {
	case "text":
		return json.Marshal(struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}{c.Type, c.Text})
	case "image":
		return json.Marshal(struct {
			Type      string `json:"type"`
			Data      string `json:"data"`
			MediaType string `json:"mediaType"`
		}{c.Type, c.Data, c.MediaType})
	}
	type plain ContentItem
	return json.Marshal(plain(c))
}

// TextContent returns a text content item.
func TextContent(text string) ContentItem { return ContentItem{Type: "text", Text: text} }

// ImageContent returns an image content item; data is base64-encoded.
func ImageContent(data, mediaType string) ContentItem {
	return ContentItem{Type: "image", Data: data, MediaType: mediaType}
}

// DisplaySegment is one entry of a tool result's display_as list (RAP RE-3).
// Content is a JSON string for "text" segments and an object for "diff"
// ({path, patch}) and "image" ({data, mediaType}) segments.
type DisplaySegment struct {
	// Type is "text", "diff", "image" or a type some client may know.
	Type string `json:"type"`
	// Content is the segment's JSON content, compacted.
	Content json.RawMessage `json:"content"`
}

// TextSegment returns a "text" display segment.
func TextSegment(text string) DisplaySegment {
	b, _ := json.Marshal(text)
	return DisplaySegment{Type: "text", Content: b}
}

// DiffSegment returns a "diff" display segment for a unified diff of path.
func DiffSegment(path, patch string) DisplaySegment {
	b, _ := json.Marshal(map[string]string{"path": path, "patch": patch})
	return DisplaySegment{Type: "diff", Content: b}
}

// ImageSegment returns an "image" display segment; data is base64-encoded.
func ImageSegment(data, mediaType string) DisplaySegment {
	b, _ := json.Marshal(map[string]string{"data": data, "mediaType": mediaType})
	return DisplaySegment{Type: "image", Content: b}
}

// ToolResult delivers the outcome of a tool call (RAP RE-1).
type ToolResult struct {
	// GroupID is the invocation's group_id: it picks the thread (RAP RE-5).
	GroupID string `json:"group_id"`
	// ID is the invocation's id: it picks the pending call (RAP RE-5).
	ID string `json:"id"`
	// CallID echoes the invocation's call_id when it had one.
	CallID string `json:"call_id,omitempty"`
	// Text is the result for the model. It is always sent when Content is
	// empty, even if it is the empty string.
	Text string `json:"text,omitempty"`
	// Content, when present, supersedes Text for the model (RAP RE-1, RE-2).
	Content []ContentItem `json:"content,omitempty"`
	// DisplayAs holds presentation hints for people; the model never sees them.
	DisplayAs []DisplaySegment `json:"display_as,omitempty"`
	// Subscription marks the result that confirms a subscription (RAP SU-1).
	Subscription bool `json:"subscription,omitempty"`
}

// MessageType implements Callback.
func (*ToolResult) MessageType() MessageType { return TypeToolResult }

// Thread implements Callback.
func (r *ToolResult) Thread() string { return r.GroupID }

// MarshalJSON adds the "type" member and keeps "text" when it is the only
// result the message has.
func (r ToolResult) MarshalJSON() ([]byte, error) {
	type plain ToolResult
	out := struct {
		Type MessageType `json:"type"`
		plain
		Text *string `json:"text,omitempty"`
	}{Type: TypeToolResult, plain: plain(r)}
	if r.Text != "" || len(r.Content) == 0 {
		out.Text = &r.Text
	}
	return json.Marshal(out)
}

// ModelText returns the text the model should see: the text items of
// Content when Content is present (with a placeholder for each image), and
// Text otherwise.
func (r *ToolResult) ModelText() string {
	if len(r.Content) == 0 {
		return r.Text
	}
	var s string
	for i, c := range r.Content {
		if i > 0 {
			s += "\n"
		}
		switch c.Type {
		case "text":
			s += c.Text
		case "image":
			s += fmt.Sprintf("[image %s omitted: the current model does not accept images]", c.MediaType)
		}
	}
	return s
}

// SubscriptionEvent is one event of an active subscription (RAP SU-2).
type SubscriptionEvent struct {
	// GroupID is the subscribing invocation's group_id.
	GroupID string `json:"group_id"`
	// ToolCallID is the id of the invocation that created the subscription.
	ToolCallID string `json:"tool_call_id"`
	// Text is the event payload; JSON text is preferred.
	Text string `json:"text"`
	// Associative asks for inline processing in the subscribing thread.
	Associative bool `json:"associative,omitempty"`
	// Final marks the last event; the tool sends nothing after it.
	Final bool `json:"final,omitempty"`
	// EventID is a gorap extension: a stable id of this event, the same on
	// every redelivery, so that a runtime can apply each event once. Other
	// runtimes ignore the field. Empty when the sender did not set one.
	EventID string `json:"event_id,omitempty"`
}

// MessageType implements Callback.
func (*SubscriptionEvent) MessageType() MessageType { return TypeSubscriptionEvent }

// Thread implements Callback.
func (e *SubscriptionEvent) Thread() string { return e.GroupID }

// MarshalJSON adds the "type" member.
func (e SubscriptionEvent) MarshalJSON() ([]byte, error) {
	type plain SubscriptionEvent
	return json.Marshal(struct {
		Type MessageType `json:"type"`
		plain
	}{TypeSubscriptionEvent, plain(e)})
}

// OAuth asks the runtime to show an authorization link to the user; the call
// stays pending until a ToolResult arrives (RAP OA-1).
type OAuth struct {
	// GroupID is the invocation's group_id.
	GroupID string `json:"group_id"`
	// ID is the invocation's id; the call stays pending.
	ID string `json:"id"`
	// CallID echoes the invocation's call_id when it had one.
	CallID string `json:"call_id,omitempty"`
	// AuthURL is the authorization page the user must visit.
	AuthURL string `json:"auth_url"`
}

// MessageType implements Callback.
func (*OAuth) MessageType() MessageType { return TypeOAuth }

// Thread implements Callback.
func (o *OAuth) Thread() string { return o.GroupID }

// MarshalJSON adds the "type" member.
func (o OAuth) MarshalJSON() ([]byte, error) {
	type plain OAuth
	return json.Marshal(struct {
		Type MessageType `json:"type"`
		plain
	}{TypeOAuth, plain(o)})
}

// UserChoice asks the user to pick one of Choices; the runtime POSTs a
// UserChoiceResponse to ResponseURL (RAP UC-1, UC-2).
type UserChoice struct {
	// GroupID is the invocation's group_id.
	GroupID string `json:"group_id"`
	// ID is the invocation's id; the call stays pending.
	ID string `json:"id"`
	// CallID echoes the invocation's call_id when it had one.
	CallID string `json:"call_id,omitempty"`
	// Prompt says what the user is asked.
	Prompt string `json:"prompt"`
	// Choices are the labels offered; there is at least one.
	Choices []string `json:"choices"`
	// Default is the index chosen when the user dismisses the prompt.
	Default int `json:"default"`
	// ResponseURL is where the runtime POSTs the UserChoiceResponse.
	ResponseURL string `json:"response_url"`
}

// MessageType implements Callback.
func (*UserChoice) MessageType() MessageType { return TypeUserChoice }

// Thread implements Callback.
func (u *UserChoice) Thread() string { return u.GroupID }

// MarshalJSON adds the "type" member.
func (u UserChoice) MarshalJSON() ([]byte, error) {
	type plain UserChoice
	return json.Marshal(struct {
		Type MessageType `json:"type"`
		plain
	}{TypeUserChoice, plain(u)})
}

// ViewUpdate replaces the content of one named view of a thread (RAP VU-1).
type ViewUpdate struct {
	// GroupID is the thread whose view is updated.
	GroupID string `json:"group_id"`
	// ViewType names the view, e.g. "diff".
	ViewType string `json:"view_type"`
	// Content is an object the runtime stores and forwards uninterpreted.
	Content json.RawMessage `json:"content"`
}

// MessageType implements Callback.
func (*ViewUpdate) MessageType() MessageType { return TypeViewUpdate }

// Thread implements Callback.
func (v *ViewUpdate) Thread() string { return v.GroupID }

// MarshalJSON adds the "type" member.
func (v ViewUpdate) MarshalJSON() ([]byte, error) {
	type plain ViewUpdate
	return json.Marshal(struct {
		Type MessageType `json:"type"`
		plain
	}{TypeViewUpdate, plain(v)})
}

// DecodeCallback parses any callback message strictly. An unknown "type",
// a missing required field or a member of the wrong JSON type is an error
// that names the field (RAP TR-5).
func DecodeCallback(data []byte) (Callback, error) {
	o, err := parseObject(data, "")
	if err != nil {
		return nil, err
	}
	t, err := o.nonEmpty("type")
	if err != nil {
		return nil, err
	}
	switch MessageType(t) {
	case TypeToolResult, TypeSubscriptionEvent, TypeOAuth, TypeUserChoice, TypeViewUpdate, TypeUserInput:
	default:
		return nil, &FieldError{Field: "type", Problem: fmt.Sprintf("unknown message type %q; want one of tool_result, subscription_event, oauth, user_choice, view_update, user_input", t)}
	}
	groupID, err := o.nonEmpty("group_id")
	if err != nil {
		return nil, err
	}
	switch MessageType(t) {
	case TypeToolResult:
		return decodeToolResult(o, groupID)
	case TypeSubscriptionEvent:
		e := &SubscriptionEvent{GroupID: groupID}
		if e.ToolCallID, err = o.nonEmpty("tool_call_id"); err != nil {
			return nil, err
		}
		if e.Text, err = o.str("text", true); err != nil {
			return nil, err
		}
		if e.Associative, err = o.boolean("associative"); err != nil {
			return nil, err
		}
		if e.Final, err = o.boolean("final"); err != nil {
			return nil, err
		}
		if e.EventID, err = o.str("event_id", false); err != nil {
			return nil, err
		}
		return e, nil
	case TypeOAuth:
		m := &OAuth{GroupID: groupID}
		if m.ID, err = o.nonEmpty("id"); err != nil {
			return nil, err
		}
		if m.CallID, err = o.str("call_id", false); err != nil {
			return nil, err
		}
		if m.AuthURL, err = o.nonEmpty("auth_url"); err != nil {
			return nil, err
		}
		return m, nil
	case TypeUserChoice:
		return decodeUserChoice(o, groupID)
	case TypeUserInput:
		return decodeUserInput(o, groupID)
	case TypeViewUpdate:
		v := &ViewUpdate{GroupID: groupID}
		if v.ViewType, err = o.str("view_type", true); err != nil {
			return nil, err
		}
		// RAP VU-1 describes content as an object, but the runtime never
		// interprets it and the reference takes any JSON value, so gorap
		// does too; it must be present, even as null.
		content, ok := o.members["content"]
		if !ok {
			return nil, o.missing("content")
		}
		v.Content = compactJSON(content)
		return v, nil
	default:
		return nil, &FieldError{Field: "type", Problem: fmt.Sprintf("unknown message type %q; want one of tool_result, subscription_event, oauth, user_choice, view_update", t)}
	}
}

func decodeToolResult(o *object, groupID string) (*ToolResult, error) {
	var err error
	r := &ToolResult{GroupID: groupID}
	if r.ID, err = o.nonEmpty("id"); err != nil {
		return nil, err
	}
	if r.CallID, err = o.str("call_id", false); err != nil {
		return nil, err
	}
	// RAP RE-1 asks for text or content, but the reference runtime takes a
	// result with neither (or with an empty content list) as an empty
	// result, and so does gorap: refusing it would leave
	// the call pending for ever with a tool whose sender never retries.
	if r.Text, err = o.str("text", false); err != nil {
		return nil, err
	}
	items, _, err := o.array("content")
	if err != nil {
		return nil, err
	}
	for i, raw := range items {
		item, err := decodeContentItem(raw, fmt.Sprintf("content[%d]", i))
		if err != nil {
			return nil, err
		}
		r.Content = append(r.Content, item)
	}
	segs, _, err := o.array("display_as")
	if err != nil {
		return nil, err
	}
	for i, raw := range segs {
		seg, err := decodeSegment(raw, fmt.Sprintf("display_as[%d]", i))
		if err != nil {
			return nil, err
		}
		r.DisplayAs = append(r.DisplayAs, seg)
	}
	if r.Subscription, err = o.boolean("subscription"); err != nil {
		return nil, err
	}
	return r, nil
}

func decodeContentItem(raw json.RawMessage, path string) (ContentItem, error) {
	o, err := parseObject(raw, path)
	if err != nil {
		return ContentItem{}, err
	}
	var c ContentItem
	if c.Type, err = o.nonEmpty("type"); err != nil {
		return c, err
	}
	switch c.Type {
	case "text":
		c.Text, err = o.str("text", true)
	case "image":
		if c.Data, err = o.nonEmpty("data"); err == nil {
			c.MediaType, err = o.nonEmpty("mediaType")
		}
	default:
		err = &FieldError{Field: path + ".type", Problem: fmt.Sprintf("unknown content type %q; want text or image", c.Type)}
	}
	return c, err
}

func decodeSegment(raw json.RawMessage, path string) (DisplaySegment, error) {
	o, err := parseObject(raw, path)
	if err != nil {
		return DisplaySegment{}, err
	}
	var s DisplaySegment
	if s.Type, err = o.nonEmpty("type"); err != nil {
		return s, err
	}
	content, ok := o.raw("content")
	if !ok {
		return s, o.missing("content")
	}
	switch s.Type {
	case "text":
		if jsonKind(content) != "string" {
			return s, o.wrongType("content", "a string for a text segment", content)
		}
	case "diff", "image":
		if jsonKind(content) != "object" {
			return s, o.wrongType("content", "an object for a "+s.Type+" segment", content)
		}
	}
	// Unknown segment types are kept as they are: clients skip them (RAP RE-3).
	s.Content = compactJSON(content)
	return s, nil
}

func decodeUserChoice(o *object, groupID string) (*UserChoice, error) {
	var err error
	u := &UserChoice{GroupID: groupID}
	if u.ID, err = o.nonEmpty("id"); err != nil {
		return nil, err
	}
	if u.CallID, err = o.str("call_id", false); err != nil {
		return nil, err
	}
	if u.Prompt, err = o.str("prompt", true); err != nil {
		return nil, err
	}
	if u.Choices, err = o.strings("choices", true); err != nil {
		return nil, err
	}
	if len(u.Choices) == 0 {
		return nil, &FieldError{Field: "choices", Problem: "must contain at least one choice"}
	}
	// Absent, default is 0 as in the reference.
	if u.Default, _, err = o.integer("default", false); err != nil {
		return nil, err
	}
	if u.Default < 0 || u.Default >= len(u.Choices) {
		return nil, &FieldError{Field: "default", Problem: fmt.Sprintf("index %d is out of range for %d choices", u.Default, len(u.Choices))}
	}
	if u.ResponseURL, err = o.nonEmpty("response_url"); err != nil {
		return nil, err
	}
	return u, nil
}

// CloseThreadRequest is the body of POST {base}/close_thread (RAP TC-1).
type CloseThreadRequest struct {
	// ThreadID is the group_id of the thread being closed.
	ThreadID string `json:"thread_id"`
}

// DecodeCloseThread parses a /close_thread body strictly.
func DecodeCloseThread(data []byte) (*CloseThreadRequest, error) {
	o, err := parseObject(data, "")
	if err != nil {
		return nil, err
	}
	r := &CloseThreadRequest{}
	r.ThreadID, err = o.nonEmpty("thread_id")
	if err != nil {
		return nil, err
	}
	return r, nil
}

// CancelToolCallRequest is the body of POST {base}/cancel_tool_call (RAP CA-1).
type CancelToolCallRequest struct {
	// ThreadID is the group_id of the thread holding the call.
	ThreadID string `json:"thread_id"`
	// ToolCallID is the id of the invocation to cancel.
	ToolCallID string `json:"tool_call_id"`
}

// DecodeCancelToolCall parses a /cancel_tool_call body strictly.
func DecodeCancelToolCall(data []byte) (*CancelToolCallRequest, error) {
	o, err := parseObject(data, "")
	if err != nil {
		return nil, err
	}
	r := &CancelToolCallRequest{}
	if r.ThreadID, err = o.nonEmpty("thread_id"); err != nil {
		return nil, err
	}
	if r.ToolCallID, err = o.nonEmpty("tool_call_id"); err != nil {
		return nil, err
	}
	return r, nil
}

// ToolCallStatusRequest is the body of POST {base}/tool_call_status: a
// runtime asks a tool server whether it still knows a call that has been
// pending for long. Its fields are those of CancelToolCallRequest.
type ToolCallStatusRequest = CancelToolCallRequest

// DecodeToolCallStatus parses a /tool_call_status body strictly.
func DecodeToolCallStatus(data []byte) (*ToolCallStatusRequest, error) {
	return DecodeCancelToolCall(data)
}

// CallState is what a tool server says of a call in a ToolCallStatus.
type CallState string

// Call states of a ToolCallStatus.
const (
	// CallRunning: the call was accepted and its result is not yet sent.
	CallRunning CallState = "running"
	// CallDelivering: the result is made and waits in the outbox for
	// delivery to the runtime.
	CallDelivering CallState = "delivering"
	// CallSubscribed: the call is an active subscription.
	CallSubscribed CallState = "subscribed"
	// CallUnknown: the server knows nothing of the call. It is answered
	// with status 404, so a runtime may end the call with an error result.
	CallUnknown CallState = "unknown"
)

// ToolCallStatus is the JSON answer to POST {base}/tool_call_status. A
// server answers 200 for a call it knows and 404 with Status CallUnknown
// for one it does not. A 404 without this body means the server does not
// implement the endpoint, which says nothing about the call.
type ToolCallStatus struct {
	// ToolCallID echoes the request's tool_call_id.
	ToolCallID string `json:"tool_call_id"`
	// Status is the call's state.
	Status CallState `json:"status"`
}

// MigrateRequest is the body of POST {base}/migrate (RAP MI-1).
type MigrateRequest struct {
	// SessionID is the root thread id of the session being migrated.
	SessionID string `json:"session_id"`
	// DestinationURL is the base URL of the destination tool server.
	DestinationURL string `json:"destination_url"`
}

// DecodeMigrate parses a /migrate body strictly.
func DecodeMigrate(data []byte) (*MigrateRequest, error) {
	o, err := parseObject(data, "")
	if err != nil {
		return nil, err
	}
	r := &MigrateRequest{}
	if r.SessionID, err = o.nonEmpty("session_id"); err != nil {
		return nil, err
	}
	if r.DestinationURL, err = o.nonEmpty("destination_url"); err != nil {
		return nil, err
	}
	return r, nil
}

// UserChoiceResponse is what the runtime POSTs to a user choice's
// response_url (RAP UC-2).
type UserChoiceResponse struct {
	// ID is the user choice's id (the tool call id).
	ID string `json:"id"`
	// Selected is the index of the chosen label.
	Selected int `json:"selected"`
}

// DecodeUserChoiceResponse parses a user-choice response strictly.
func DecodeUserChoiceResponse(data []byte) (*UserChoiceResponse, error) {
	o, err := parseObject(data, "")
	if err != nil {
		return nil, err
	}
	r := &UserChoiceResponse{}
	if r.ID, err = o.nonEmpty("id"); err != nil {
		return nil, err
	}
	if r.Selected, _, err = o.integer("selected", true); err != nil {
		return nil, err
	}
	if r.Selected < 0 {
		return nil, &FieldError{Field: "selected", Problem: "must not be negative"}
	}
	return r, nil
}
