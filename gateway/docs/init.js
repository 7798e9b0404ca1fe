// Renders the reference from the engine's own document. Nothing here or in
// Swagger UI's bundle loads from another host: validatorUrl null turns off
// the one feature that would (the online validator badge).
window.addEventListener("load", function () {
  window.ui = SwaggerUIBundle({
    url: "openapi.json",
    dom_id: "#reference",
    deepLinking: true,
    validatorUrl: null,
    presets: [SwaggerUIBundle.presets.apis],
    layout: "BaseLayout",
    docExpansion: "list",
    defaultModelsExpandDepth: 0,
    displayOperationId: true,
  });
});
