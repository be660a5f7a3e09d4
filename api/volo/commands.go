package volo

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/hookd/hookd/agent"
	"github.com/hookd/hookd/agent/tools"
	"github.com/hookd/hookd/api/wire"
)

// CommandDef is a built-in command.
type CommandDef struct {
	Trigger     string `json:"triggerChar"`
	Name        string `json:"name"`
	Usage       string `json:"usage"`
	Description string `json:"description"`
}

// Commands are the built-in commands. A message that starts with / or # is a command turn (it
// starts no run); one that starts with @ names workspace files given to the model with the rest
// of the message.
var Commands = []CommandDef{
	{"/", "help", "/help", "list the commands"},
	{"/", "tools", "/tools", "list the tools the agent can call"},
	{"/", "clear", "/clear", "start afresh: the model no longer sees the messages so far (the history keeps them)"},
	{"#", "help", "#help", "list the commands (same as /help)"},
	{"#", "tools", "#tools", "list the tools the agent can call (same as /tools)"},
	{"#", "clear", "#clear", "start afresh (same as /clear)"},
	{"@", "file", "@<path> <message>", "give a file of the session's workspace to the model with the message"},
}

// parseCommand splits "/name args" or "#name args".
func parseCommand(msg string) (trigger, name, args string, ok bool) {
	if msg == "" || (msg[0] != '/' && msg[0] != '#') {
		return "", "", "", false
	}
	rest := msg[1:]
	name, args, _ = strings.Cut(rest, " ")
	if i := strings.IndexAny(name, "\t\n\r"); i >= 0 {
		name, args = name[:i], rest[i+1:]
	}
	return msg[:1], strings.ToLower(name), strings.TrimSpace(args), true
}

func boolPtr(b bool) *bool { return &b }

func commandFrames(tr TraceInfo, cmd Command, result any, err error) []Event {
	now := Timestamp(time.Now())
	start := cmd
	res := cmd
	res.Success = boolPtr(err == nil)
	if err != nil {
		res.Error = err.Error()
	} else {
		res.Result = result
	}
	end := cmd
	end.Success = res.Success
	return []Event{
		{Type: TypeCommandStart, TraceInfo: tr, Timestamp: now, Command: &start},
		{Type: TypeCommandResult, TraceInfo: tr, Timestamp: now, Command: &res},
		{Type: TypeCommandEnd, TraceInfo: tr, Timestamp: now, Command: &end},
	}
}

func completeFrame(tr TraceInfo, ok bool) Event {
	st := StatusCompleted
	if !ok {
		st = StatusFailed
	}
	return Event{Type: TypeComplete, TraceInfo: tr, Timestamp: Timestamp(time.Now()), Status: st}
}

// commandTurn runs a / or # command: COMMAND_START, COMMAND_RESULT, COMMAND_END, COMPLETE.
func (h *handler) commandTurn(c *gin.Context, caller wire.Caller, tr TraceInfo, trigger, name, args string) {
	result, err := h.runCommand(c.Request.Context(), caller, tr.SessionID, trigger, name)
	frames := commandFrames(tr, Command{Trigger: trigger, Name: name, Args: args}, result, err)
	writeFrames(c, append(frames, completeFrame(tr, err == nil)))
}

// ToolItem is one entry of /tools.
type ToolItem struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	ReadOnly    bool   `json:"readOnly"`
}

func (h *handler) runCommand(ctx context.Context, caller wire.Caller, key, trigger, name string) (any, error) {
	switch name {
	case "help":
		return completions("", ""), nil
	case "tools":
		specs := h.rt.Tools()
		out := make([]ToolItem, len(specs))
		for i, s := range specs {
			out[i] = ToolItem{Name: s.Name, Description: s.Description, ReadOnly: s.ReadOnly}
		}
		return out, nil
	case "clear":
		sess, err := h.rt.Session(ctx, caller.UserID, key)
		if errors.Is(err, agent.ErrNotFound) {
			return map[string]any{"cleared": false, "message": "the session has no messages yet"}, nil
		} else if err != nil {
			h.d.Log.ErrorContext(ctx, "volo /clear", "err", err)
			return nil, errors.New("the context could not be cleared")
		}
		if err := h.rt.ResetContext(ctx, sess.ID); err != nil {
			h.d.Log.ErrorContext(ctx, "volo /clear", "err", err)
			return nil, errors.New("the context could not be cleared")
		}
		return map[string]any{"cleared": true, "message": "the model starts afresh from the next message"}, nil
	}
	return nil, fmt.Errorf("unknown command %s%s: try %shelp", trigger, name, trigger)
}

// ---- @file ----

// splitFileRefs takes the leading @path tokens off a message.
func splitFileRefs(msg string) (paths []string, rest string) {
	s := strings.TrimSpace(msg)
	for strings.HasPrefix(s, "@") {
		tok, after, _ := strings.Cut(s, " ")
		if i := strings.IndexAny(tok, "\t\n\r"); i >= 0 {
			tok, after = tok[:i], s[i+1:]
		}
		paths = append(paths, tok[1:])
		s = strings.TrimSpace(after)
	}
	return paths, s
}

// fileRef is a workspace file given to the model.
type fileRef struct {
	Path      string `json:"path"`
	Size      int64  `json:"size"`
	MediaType string `json:"mediaType"`
	GivenAs   string `json:"givenAs"` // text | image
	text      string
	image     string
}

type fileError struct {
	path string
	err  error
}

func (e *fileError) Error() string { return e.err.Error() }

// readFiles reads @files from the caller's session workspace: text files become text, images
// data URLs; other binary files are refused.
func (h *handler) readFiles(ctx context.Context, caller wire.Caller, key string, paths []string) ([]fileRef, *fileError) {
	var dir string
	sess, err := h.rt.Session(ctx, caller.UserID, key)
	switch {
	case errors.Is(err, agent.ErrNotFound):
	case err != nil:
		return nil, &fileError{path: first(paths), err: errors.New("the workspace is not available")}
	default:
		if dir, err = h.rt.Workspace(sess.ID); err != nil {
			return nil, &fileError{path: first(paths), err: errors.New("the workspace is not available")}
		}
	}
	var out []fileRef
	for _, p := range paths {
		if strings.TrimSpace(p) == "" {
			return nil, &fileError{path: p, err: errors.New("@ must be followed by a workspace file path")}
		}
		if dir == "" {
			return nil, &fileError{path: p, err: fmt.Errorf("%s does not exist (the session has no workspace yet)", p)}
		}
		ref, err := readWorkspaceFile(dir, p)
		if err != nil {
			return nil, &fileError{path: p, err: err}
		}
		out = append(out, ref)
	}
	return out, nil
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

func readWorkspaceFile(dir, p string) (fileRef, error) {
	wp, err := tools.ResolvePath(dir, p)
	if err != nil {
		return fileRef{}, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fileRef{}, errors.New("the workspace is not available")
	}
	defer root.Close()
	rel := filepath.FromSlash(wp.Rel)
	fi, err := root.Stat(rel)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fileRef{}, fmt.Errorf("%s does not exist", wp.Rel)
	case err != nil:
		return fileRef{}, fmt.Errorf("cannot read %s", wp.Rel)
	case !fi.Mode().IsRegular():
		return fileRef{}, fmt.Errorf("%s is not a regular file", wp.Rel)
	case fi.Size() > tools.MaxDataBytes:
		return fileRef{}, fmt.Errorf("%s is too large (%d bytes)", wp.Rel, fi.Size())
	}
	f, err := root.Open(rel)
	if err != nil {
		return fileRef{}, fmt.Errorf("cannot read %s", wp.Rel)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, tools.MaxDataBytes+1))
	if err != nil || len(data) > tools.MaxDataBytes {
		return fileRef{}, fmt.Errorf("cannot read %s", wp.Rel)
	}
	media := mime.TypeByExtension(path.Ext(wp.Rel))
	if media == "" {
		media = http.DetectContentType(data)
	}
	media, _, _ = strings.Cut(media, ";")
	ref := fileRef{Path: wp.Rel, Size: int64(len(data)), MediaType: media}
	switch {
	case strings.HasPrefix(media, "image/") && media != "image/svg+xml":
		ref.GivenAs, ref.image = "image", "data:"+media+";base64,"+base64.StdEncoding.EncodeToString(data)
	case utf8.Valid(data) && !bytes.ContainsRune(data, 0):
		if len(data) > tools.MaxReadBytes {
			return fileRef{}, fmt.Errorf("%s is too large to give as text (%d bytes, limit %d)", wp.Rel, len(data), tools.MaxReadBytes)
		}
		ref.GivenAs, ref.text = "text", string(data)
	default:
		return fileRef{}, fmt.Errorf("%s is a binary file (%s): only text files and images can be given to the model", wp.Rel, media)
	}
	return ref, nil
}

// addFiles appends the files to the model's input: text inside <file> tags, images as images.
func addFiles(input string, images []string, refs []fileRef) (string, []string) {
	var b strings.Builder
	b.WriteString(input)
	for _, r := range refs {
		if r.GivenAs == "image" {
			images = append(images, r.image)
			fmt.Fprintf(&b, "\n\n<file path=%q mediaType=%q>(given as an image)</file>", r.Path, r.MediaType)
			continue
		}
		fmt.Fprintf(&b, "\n\n<file path=%q>\n%s\n</file>", r.Path, strings.TrimRight(r.text, "\n"))
	}
	return strings.TrimSpace(b.String()), images
}

// fileFrames are the COMMAND frames of the @files of a turn (their trace is set by the caller).
func fileFrames(refs []fileRef) []Event {
	var out []Event
	for _, r := range refs {
		out = append(out, commandFrames(TraceInfo{}, Command{Trigger: "@", Name: "file", Args: r.Path}, r, nil)...)
	}
	return out
}

// fileFailure answers a turn whose @file could not be read: the command frames with the error
// and COMPLETE FAILED; no run starts.
func (h *handler) fileFailure(c *gin.Context, tr TraceInfo, e *fileError) {
	frames := commandFrames(tr, Command{Trigger: "@", Name: "file", Args: e.path}, nil, e.err)
	writeFrames(c, append(frames, completeFrame(tr, false)))
}

// ---- attachments ----

// Attachment is a multimodal attachment of a ChatRequest. Type is image, document, video or file
// (inferred from the media type when absent); the content is URL (http(s) or data:), Data
// (base64; also read from "base64") or, for documents, Content (text). The media type is read
// from mediaType, mimeType or contentType, the name from name or fileName: the names clients use
// for the same things, each a field of its own so that the strict decoding names any other, and
// two of them given different values are refused (which was meant is not known).
type Attachment struct {
	Type        string `json:"type"`
	Name        string `json:"name"`
	FileName    string `json:"fileName"`
	MediaType   string `json:"mediaType"`
	MimeType    string `json:"mimeType"`
	ContentType string `json:"contentType"`
	URL         string `json:"url"`
	Data        string `json:"data"`
	Base64      string `json:"base64"`
	Content     string `json:"content"`
}

// resolve folds the aliases into Name, MediaType and Data; at names the attachment for an error.
func (a *Attachment) resolve(at string) *apiError {
	one := func(dst *string, names string, vals ...string) *apiError {
		for _, v := range vals {
			switch {
			case v == "":
			case *dst == "":
				*dst = v
			case *dst != v:
				return badRequest("%s: %s name one thing; give one of them", at, names)
			}
		}
		return nil
	}
	if e := one(&a.Name, "name and fileName", a.FileName); e != nil {
		return e
	}
	if e := one(&a.MediaType, "mediaType, mimeType and contentType", a.MimeType, a.ContentType); e != nil {
		return e
	}
	return one(&a.Data, "data and base64", a.Base64)
}

// attachmentContent gives the attachments to the model: images as StartRequest.Images (data URLs
// or URLs), text documents appended to the input, others by reference (name and URL).
func attachmentContent(text string, atts []Attachment) (string, []string, *apiError) {
	var b strings.Builder
	b.WriteString(strings.TrimSpace(text))
	var images []string
	for i, a := range atts {
		if e := a.resolve(fmt.Sprintf("attachments[%d]", i)); e != nil {
			return "", nil, e
		}
		typ := strings.ToLower(strings.TrimSpace(a.Type))
		mt := strings.ToLower(strings.TrimSpace(a.MediaType))
		if typ == "" {
			switch {
			case strings.HasPrefix(mt, "image/") || strings.HasPrefix(a.URL, "data:image/") || strings.HasPrefix(a.Data, "data:image/"):
				typ = "image"
			case strings.HasPrefix(mt, "video/"):
				typ = "video"
			default:
				typ = "document"
			}
		}
		name := a.Name
		if name == "" {
			name = fmt.Sprintf("attachment-%d", i+1)
		}
		switch typ {
		case "image":
			u, err := imageURL(a, mt)
			if err != nil {
				return "", nil, badRequest("attachments[%d]: %v", i, err)
			}
			images = append(images, u)
		case "document", "file", "text":
			content := a.Content
			if content == "" && a.Data != "" {
				raw, err := decodeData(a.Data)
				if err != nil {
					return "", nil, badRequest("attachments[%d].data: %v", i, err)
				}
				if !utf8.Valid(raw) || bytes.ContainsRune(raw, 0) {
					return "", nil, badRequest("attachments[%d]: a binary document (%s) cannot be given to the model; send text, or an image", i, mt)
				}
				content = string(raw)
			}
			switch {
			case content != "":
				fmt.Fprintf(&b, "\n\n<attachment name=%q mediaType=%q>\n%s\n</attachment>", name, mt, strings.TrimRight(content, "\n"))
			case a.URL != "":
				fmt.Fprintf(&b, "\n\n[attachment %s (%s): %s]", name, mt, a.URL)
			default:
				return "", nil, badRequest("attachments[%d]: has no content, data or url", i)
			}
		case "video":
			if a.URL == "" || strings.HasPrefix(a.URL, "data:") {
				return "", nil, badRequest("attachments[%d]: a video is given to the model by its url only", i)
			}
			fmt.Fprintf(&b, "\n\n[video %s (%s): %s]", name, mt, a.URL)
		default:
			return "", nil, badRequest("attachments[%d].type: %q is not one of image, document, video, file", i, a.Type)
		}
	}
	return b.String(), images, nil
}

func imageURL(a Attachment, mt string) (string, error) {
	switch {
	case a.URL != "":
		if strings.HasPrefix(a.URL, "https://") || strings.HasPrefix(a.URL, "http://") || strings.HasPrefix(a.URL, "data:image/") {
			return a.URL, nil
		}
		return "", errors.New("url: an image url must be http(s) or a data:image/ URL")
	case strings.HasPrefix(a.Data, "data:image/"):
		return a.Data, nil
	case a.Data != "":
		if _, err := decodeData(a.Data); err != nil {
			return "", fmt.Errorf("data: %v", err)
		}
		if !strings.HasPrefix(mt, "image/") {
			mt = "image/png"
		}
		return "data:" + mt + ";base64," + strings.TrimSpace(a.Data), nil
	}
	return "", errors.New("an image needs a url or data")
}

func decodeData(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "data:") {
		if _, after, ok := strings.Cut(s, ","); ok {
			s = after
		}
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, errors.New("not valid base64")
	}
	return b, nil
}

// ---- autocomplete ----

// CompletionItem is one entry of GET commands (ChatCommandCompletionItem).
type CompletionItem struct {
	Label       string `json:"label"`
	InsertText  string `json:"insertText"`
	TriggerChar string `json:"triggerChar"`
	Name        string `json:"name"`
	Description string `json:"description"`
	Kind        string `json:"kind"` // command | file
}

// completions lists the built-in commands of a trigger ("" = all) whose name starts with query.
func completions(trigger, query string) []CompletionItem {
	out := []CompletionItem{}
	q := strings.ToLower(query)
	for _, d := range Commands {
		if (trigger != "" && d.Trigger != trigger) || !strings.HasPrefix(d.Name, q) {
			continue
		}
		insert := d.Trigger + d.Name + " "
		if d.Trigger == "@" {
			insert = "@"
		}
		out = append(out, CompletionItem{Label: d.Usage, InsertText: insert, TriggerChar: d.Trigger, Name: d.Name,
			Description: d.Description, Kind: "command"})
	}
	return out
}

// maxFileItems bounds the workspace files GET commands lists for @.
const maxFileItems = 200

func (h *handler) commands(c *gin.Context) {
	caller, err := h.d.Keys.Identify(c.Request, "")
	if err != nil {
		h.fail(c, authError(err))
		return
	}
	trigger := c.Query("triggerChar")
	switch trigger {
	case "", "/", "#", "@":
	default:
		h.fail(c, badRequest("triggerChar: %q is not one of /, #, @", trigger))
		return
	}
	query := strings.TrimSpace(c.Query("query"))
	key := c.Query("sessionId")
	if trigger != "@" || key == "" {
		reply(c, http.StatusOK, msgSuccess, completions(trigger, query))
		return
	}
	// @ in a session: the files of its workspace whose path starts with query.
	out := []CompletionItem{}
	sess, err := h.rt.Session(c.Request.Context(), caller.UserID, key)
	if err == nil {
		if dir, err := h.rt.Workspace(sess.ID); err == nil {
			out = fileCompletions(dir, query)
		}
	}
	reply(c, http.StatusOK, msgSuccess, out)
}

func fileCompletions(dir, query string) []CompletionItem {
	var paths []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if strings.Count(rel, "/") >= 3 || strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() && strings.HasPrefix(strings.ToLower(rel), strings.ToLower(query)) {
			paths = append(paths, rel)
		}
		if len(paths) >= maxFileItems {
			return filepath.SkipAll
		}
		return nil
	})
	sort.Strings(paths)
	out := make([]CompletionItem, 0, len(paths))
	for _, p := range paths {
		out = append(out, CompletionItem{Label: "@" + p, InsertText: "@" + p + " ", TriggerChar: "@", Name: p,
			Description: "workspace file", Kind: "file"})
	}
	return out
}
