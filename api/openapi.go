package api

import (
	_ "embed"
	"net/http"

	"github.com/gin-gonic/gin"
)

// openAPI documents the admin API; TestOpenAPIMatchesRoutes keeps it and the routes in step.
//
//go:embed openapi.json
var openAPI []byte

func serveOpenAPI(c *gin.Context) { c.Data(http.StatusOK, "application/json", openAPI) }
