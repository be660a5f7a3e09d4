package api

import (
	_ "embed"
	"net/http"

	"github.com/gin-gonic/gin"
)

// openAPI documents the HTTP API; TestOpenAPIMatchesRoutes keeps it and the routes in step, and
// openapitest checks every answer the API tests receive against it.
//
//go:embed openapi.json
var openAPI []byte

func serveOpenAPI(c *gin.Context) { c.Data(http.StatusOK, "application/json", openAPI) }

// OpenAPI is the document of the HTTP API (a copy: callers may keep or change it).
func OpenAPI() []byte { return append([]byte(nil), openAPI...) }
