// Starts Swagger UI on /docs with the service's own document (no inline script: the page's CSP allows none).

// A read is declared three times in the document (GET, and its HEAD and POST marked `x-same-as`), as the server
// takes all three; the reference lists it once, by its GET, whose description names the other two.
function OneEntryPerCall() {
  const sameAs = (operation) => operation.getIn(["operation", "x-same-as"]);
  return {
    statePlugins: {
      spec: {
        wrapSelectors: {
          taggedOperations: (original) => (state, ...args) =>
            original(state, ...args).map((tag) =>
              tag.update("operations", (operations) => operations.filter((operation) => !sameAs(operation))),
            ),
        },
      },
    },
  };
}

window.addEventListener("load", function () {
  window.ui = SwaggerUIBundle({
    url: "/openapi.json",
    dom_id: "#swagger-ui",
    deepLinking: true,
    persistAuthorization: false,
    displayRequestDuration: true,
    plugins: [OneEntryPerCall],
  });
});
