package discordfake

// SlashPayload is an INTERACTION_CREATE for the command name in a text channel (or in a
// thread of it, if parent is set), run by the fake's user.
func SlashPayload(id, token, channel, parent, name string, options ...map[string]any) map[string]any {
	ch := map[string]any{"id": channel, "type": 0}
	if parent != "" {
		ch = map[string]any{"id": channel, "type": 11, "parent_id": parent}
	}
	opts := []any{}
	for _, o := range options {
		opts = append(opts, o)
	}
	return map[string]any{
		"id": id, "application_id": AppID, "type": 2, "token": token, "version": 1,
		"guild_id": GuildID, "channel_id": channel, "channel": ch,
		"member": map[string]any{"nick": "Alice", "user": map[string]any{"id": UserID, "username": "alice"}},
		"data":   map[string]any{"id": "800000000000000001", "name": name, "type": 1, "options": opts},
	}
}

// GoalOption is the goal option of /loopbot.
func GoalOption(goal string) map[string]any {
	return map[string]any{"name": "goal", "type": 3, "value": goal}
}

// ButtonPayload is an INTERACTION_CREATE for a button on a message in a thread, pressed by
// userID.
func ButtonPayload(id, token, thread, parent, messageID, customID, userID string) map[string]any {
	return map[string]any{
		"id": id, "application_id": AppID, "type": 3, "token": token, "version": 1,
		"guild_id": GuildID, "channel_id": thread,
		"channel": map[string]any{"id": thread, "type": 11, "parent_id": parent},
		"member":  map[string]any{"user": map[string]any{"id": userID, "username": "user-" + userID}},
		"message": map[string]any{"id": messageID, "channel_id": thread},
		"data":    map[string]any{"custom_id": customID, "component_type": 2},
	}
}

// ModalSubmitPayload is an INTERACTION_CREATE for the submission of the modal customID in a
// thread by userID, with one text input inputID holding value. Its shape is that of a
// captured MODAL_SUBMIT (testdata/modal_submit.json).
func ModalSubmitPayload(id, token, thread, parent, customID, inputID, value, userID string) map[string]any {
	return map[string]any{
		"id": id, "application_id": AppID, "type": 5, "token": token, "version": 1, "locale": "en-US",
		"guild_id": GuildID, "channel_id": thread,
		"channel": map[string]any{"id": thread, "type": 11, "parent_id": parent},
		"member":  map[string]any{"user": map[string]any{"id": userID, "username": "user-" + userID}},
		"data": map[string]any{"custom_id": customID, "components": []any{map[string]any{"type": 1,
			"components": []any{map[string]any{"value": value, "type": 4, "custom_id": inputID}}}}},
	}
}

// PingPayload is the PING an HTTP interactions endpoint gets.
func PingPayload(id string) map[string]any {
	return map[string]any{"id": id, "application_id": AppID, "type": 1, "token": "ping-" + id, "version": 1}
}

// MessagePayload is a MESSAGE_CREATE by the fake's user, mentioning the given users.
func MessagePayload(id, channel, content string, mentions ...string) map[string]any {
	ms := []any{}
	for _, m := range mentions {
		ms = append(ms, map[string]any{"id": m, "username": "loopbot", "bot": true})
	}
	return map[string]any{
		"id": id, "channel_id": channel, "guild_id": GuildID, "type": 0, "content": content,
		"author":   map[string]any{"id": UserID, "username": "alice"},
		"mentions": ms,
	}
}
