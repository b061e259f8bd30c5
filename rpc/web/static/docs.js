// Starts Swagger UI on /docs with the service's own document (no inline script: the page's CSP allows none).
window.addEventListener("load", function () {
  window.ui = SwaggerUIBundle({
    url: "/openapi.json",
    dom_id: "#swagger-ui",
    deepLinking: true,
    persistAuthorization: false,
    displayRequestDuration: true,
  });
});
