package platform

import (
	"context"
	"errors"
	"mime"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/hookd/hookd/agent"
	"github.com/hookd/hookd/agent/tools"
	"github.com/hookd/hookd/api/wire"
)

// attachmentsByMessage is GET /api/agent/attachment/getByMessage?messageId=[&sessionId=]: the
// attachments of one of the caller's messages.
func (a *api) attachmentsByMessage(c *gin.Context) {
	ctx := c.Request.Context()
	caller, ok := a.identify(c, "")
	if !ok {
		return
	}
	messageID, err := strconv.ParseInt(c.Query("messageId"), 10, 64)
	if err != nil || messageID <= 0 {
		wire.Fail(c, http.StatusBadRequest, "messageId: must be a positive integer")
		return
	}
	var sessionID int64
	if s := c.Query("sessionId"); s != "" {
		if sessionID, err = strconv.ParseInt(s, 10, 64); err != nil || sessionID <= 0 {
			wire.Fail(c, http.StatusBadRequest, "sessionId: must be a positive integer")
			return
		}
	}
	sess, err := a.Runtime.MessageSession(ctx, caller.UserID, messageID)
	if err == nil && sessionID != 0 && sessionID != sess.ID {
		err = agent.ErrNotFound
	}
	if err != nil {
		a.fail(c, "messageId", err)
		return
	}
	sessionID = sess.ID
	all, err := a.Runtime.Attachments(ctx, sessionID)
	if err != nil {
		a.fail(c, "messageId", err)
		return
	}
	out := []AttachmentData{}
	for _, at := range all {
		if at.MessageID == nil || *at.MessageID != messageID {
			continue
		}
		change := "CREATED"
		if at.UpdatedAt.After(at.CreatedAt) {
			change = "UPDATED"
		}
		out = append(out, AttachmentData{Type: typeAttachment, AttachmentID: at.ID, SessionID: at.SessionID, MessageID: at.MessageID,
			FileName: at.FileName, FileExtension: at.Extension, ContentType: at.ContentType, FileSize: at.Size,
			VirtualPath: VirtualPath(at.SessionID, at.Path), Source: at.Source, ChangeType: change})
	}
	wire.OK(c, http.StatusOK, out)
}

// ownSession returns the session if it is the caller's; another user's is ErrNotFound.
func (a *api) ownSession(ctx context.Context, caller wire.Caller, id int64) (agent.SessionView, error) {
	return a.Runtime.SessionByID(ctx, caller.UserID, id)
}

// workspace is the directory of a session's workspace.
func (a *api) workspace(sessionID int64) (string, error) {
	if a.Workspaces != nil {
		return a.Workspaces.Dir(sessionID)
	}
	return a.Runtime.Workspace(sessionID)
}

var errBadPath = errors.New("must be an attachment's virtualPath (/sessions/<sessionId>/workspace/...)")

// splitVirtualPath parses "/sessions/<id>/<runtime path>"; ".." segments, backslashes and NUL
// bytes are refused outright.
func splitVirtualPath(p string) (int64, string, error) {
	if strings.ContainsAny(p, "\x00\\") {
		return 0, "", errBadPath
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." || seg == "." {
			return 0, "", errors.New("must not contain . or .. segments")
		}
	}
	rest, ok := strings.CutPrefix(p, "/sessions/")
	if !ok {
		return 0, "", errBadPath
	}
	idPart, runtimePath, ok := strings.Cut(rest, "/")
	id, err := strconv.ParseInt(idPart, 10, 64)
	if !ok || err != nil || id <= 0 || runtimePath == "" {
		return 0, "", errBadPath
	}
	return id, "/" + runtimePath, nil
}

// download is GET /api/agent/attachment/download?path=<virtualPath>: the file of one of the
// caller's attachments, read from the session's workspace. Errors use the REST wrapper; the file
// itself is sent as it is.
func (a *api) download(c *gin.Context) {
	ctx := c.Request.Context()
	caller, ok := a.identify(c, "")
	if !ok {
		return
	}
	p := c.Query("path")
	if p == "" {
		wire.Fail(c, http.StatusBadRequest, "path: is required")
		return
	}
	sessionID, runtimePath, err := splitVirtualPath(p)
	if err != nil {
		wire.Fail(c, http.StatusBadRequest, "path: %v", err)
		return
	}
	if _, err := a.ownSession(ctx, caller, sessionID); err != nil {
		a.fail(c, "path", err)
		return
	}
	all, err := a.Runtime.Attachments(ctx, sessionID)
	if err != nil {
		a.fail(c, "path", err)
		return
	}
	var att *agent.Attachment
	for i := range all {
		if all[i].Path == runtimePath {
			att = &all[i]
		}
	}
	if att == nil {
		a.fail(c, "path", agent.ErrNotFound)
		return
	}
	dir, err := a.workspace(sessionID)
	if err != nil {
		a.fail(c, "path", err)
		return
	}
	wp, err := tools.ResolvePath(dir, att.Path)
	if err != nil { // it leads outside the workspace now (a link was put in its place)
		a.Log.WarnContext(c.Request.Context(), "attachment path refused", "path", p, "err", err)
		a.fail(c, "path", agent.ErrNotFound)
		return
	}
	// os.Root also refuses a link swapped in after the check.
	root, err := os.OpenRoot(dir)
	if err != nil {
		a.fail(c, "path", err)
		return
	}
	defer root.Close()
	f, err := root.Open(wp.Rel)
	if err != nil {
		a.fail(c, "path", agent.ErrNotFound)
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		a.fail(c, "path", agent.ErrNotFound)
		return
	}
	if att.ContentType != "" {
		c.Header("Content-Type", att.ContentType)
	}
	c.Header("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": att.FileName}))
	c.Header("X-Content-Type-Options", "nosniff")
	http.ServeContent(c.Writer, c.Request, att.FileName, fi.ModTime(), f)
}
