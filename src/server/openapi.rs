//! The OpenAPI 3.1 description of the REST API, served at `GET /api/openapi.json`. Generated
//! from the code: the fixed routes from the `#[utoipa::path]` on their handlers, and one
//! `POST /api/tools/<name>` operation per registered tool whose request body is the schema of the
//! Rust type that tool parses its arguments into, and whose result is the schema of its typed
//! output (reply fields included).

use std::collections::BTreeMap;

use serde_json::Value;
use utoipa::OpenApi;
use utoipa::openapi::path::{HttpMethod, OperationBuilder, ParameterBuilder, ParameterIn};
use utoipa::openapi::request_body::RequestBodyBuilder;
use utoipa::openapi::schema::{ObjectBuilder, SchemaType, Type};
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{
    ContentBuilder, OpenApi as Document, PathItem, Ref, Required, ResponseBuilder, Responses,
};

use super::rest::SESSION_HEADER;
use crate::error::{ErrorBody, ErrorCode, ToolError};
use crate::tools::{Registry, ToolSpec};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "webpilot",
        description = "Browser and web tools for AI agents. Every error is \
            `{\"error\": {\"code\", \"message\", \"hint\"}}`; the hint says how to recover."
    ),
    paths(
        super::rest::health,
        super::rest::list_tools,
        super::rest::tool_prompt,
        super::rest::metrics,
        description,
        super::chat::chat,
        super::conversations::create,
        super::conversations::list,
        super::conversations::show,
        super::conversations::remove,
        super::conversations::message,
        super::conversations::file,
        super::crawler::create,
        super::crawler::list,
        super::crawler::status,
        super::crawler::cancel,
        super::crawler::events,
        super::replays::create,
        super::replays::status,
        super::replays::events,
        super::sessions::create,
        super::sessions::list,
        super::sessions::close,
        super::sessions::trace,
        super::sessions::trace_steps,
        super::sessions::trace_picture,
        super::confirmations::list,
        super::confirmations::answer,
    ),
    components(schemas(ErrorBody, ToolError, ErrorCode, SseEvent)),
    tags(
        (name = "tools", description = "Run one tool; the body is its arguments."),
        (name = "agent", description = "The built-in agent loop."),
        (name = "crawler", description = "Batch crawl tasks."),
        (name = "replays", description = "Traces run again without a model."),
        (name = "sessions", description = "Private browser sessions."),
        (name = "service", description = "Health, metrics and descriptions."),
    )
)]
struct FixedRoutes;

/// One server-sent event, as the streaming routes describe their events: its name and its
/// data, a JSON object as text.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
pub(super) struct SseEvent {
    event: String,
    data: String,
}

/// Name of the bearer security scheme.
const BEARER: &str = "bearer";

/// The complete description, as JSON.
/// `GET /api/openapi.json`: the description, made once.
pub(super) fn routes(app: &crate::app::App) -> axum::Router {
    let made =
        axum::body::Bytes::from(document(&app.registry, app.tenants.auth_required()).to_string());
    axum::Router::new()
        .route("/api/openapi.json", axum::routing::get(description))
        .layer(axum::Extension(made))
}

/// This description.
#[utoipa::path(get, path = "/api/openapi.json", tag = "service",
    responses((status = 200, description = "OpenAPI 3.1 description.", body = Object)))]
async fn description(
    axum::Extension(description): axum::Extension<axum::body::Bytes>,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let json = [(axum::http::header::CONTENT_TYPE, "application/json")];
    (json, description).into_response()
}

pub(super) fn document(registry: &Registry, token_required: bool) -> Value {
    let mut document = FixedRoutes::openapi();
    let tools = registry.specs();
    for tool in tools {
        document.paths.add_path_operation(
            format!("/api/tools/{}", tool.name),
            vec![HttpMethod::Post],
            tool_operation(tool),
        );
    }
    secure(&mut document, token_required);
    let mut value = serde_json::to_value(&document).unwrap_or_default();
    // Tool argument schemas are schemars output (JSON Schema 2020-12, which OpenAPI 3.1 uses
    // as is), so they join the components as JSON rather than through utoipa's schema model.
    let schemas = &mut value["components"]["schemas"];
    for tool in tools {
        schemas[arguments_name(tool.name)] = tool.input_schema.clone();
        schemas[result_name(tool.name)] = json_result(tool);
    }
    // utoipa's schemas carry OpenAPI's own formats (`int64`, `double`) too.
    crate::tools::standard_formats(&mut value);
    value
}

fn arguments_name(tool: &str) -> String {
    format!("{tool}_arguments")
}

fn result_name(tool: &str) -> String {
    format!("{tool}_result")
}

/// The result as REST sends it in JSON: the output, plus the image as base64 for image tools.
fn json_result(tool: &ToolSpec) -> Value {
    let mut schema = tool.output_schema.clone();
    if tool.returns_image {
        schema["properties"]["image"] = serde_json::json!({
            "type": "string",
            "contentEncoding": "base64",
            "description": "The image, base64 (send Accept: image/* for the raw bytes).",
        });
    }
    schema
}

fn tool_operation(tool: &ToolSpec) -> utoipa::openapi::path::Operation {
    let arguments = ContentBuilder::new()
        .schema(Some(Ref::from_schema_name(arguments_name(tool.name))))
        .build();
    let result = ContentBuilder::new()
        .schema(Some(Ref::from_schema_name(result_name(tool.name))))
        .build();
    let mut success = ResponseBuilder::new()
        .description("The tool's result.")
        .content("application/json", result);
    if tool.returns_image {
        for mime in ["image/png", "image/jpeg", "image/webp", "application/pdf"] {
            let binary = ObjectBuilder::new()
                .schema_type(SchemaType::Type(Type::String))
                .content_media_type(mime);
            success = success.content(mime, ContentBuilder::new().schema(Some(binary)).build());
        }
    }
    let session = ParameterBuilder::new()
        .name(SESSION_HEADER)
        .parameter_in(ParameterIn::Header)
        .required(Required::False)
        .description(Some(
            "Browser session to use when the arguments name none (browser tools).",
        ))
        .schema(Some(
            ObjectBuilder::new().schema_type(SchemaType::Type(Type::String)),
        ));
    let mut responses = tool_errors();
    responses
        .responses
        .insert("200".into(), success.build().into());
    OperationBuilder::new()
        .operation_id(Some(tool.name))
        .summary(Some(tool.name))
        .description(Some(tool.description))
        .tag("tools")
        .parameter(session)
        .request_body(Some(
            RequestBodyBuilder::new()
                .description(Some("The tool's arguments; an empty body means none."))
                .content("application/json", arguments)
                .build(),
        ))
        .responses(responses)
        .build()
}

/// One response per HTTP status a tool error can map to, naming the codes behind it.
fn tool_errors() -> Responses {
    let mut by_status: BTreeMap<u16, Vec<String>> = BTreeMap::new();
    for code in ErrorCode::ALL {
        if code != ErrorCode::Unauthorized {
            by_status
                .entry(code.http_status())
                .or_default()
                .push(code.name());
        }
    }
    let mut responses = Responses::new();
    for (status, codes) in by_status {
        responses
            .responses
            .insert(status.to_string(), error(codes.join(" or ")).into());
    }
    responses
}

/// A response in the error shape.
fn error(description: String) -> utoipa::openapi::Response {
    ResponseBuilder::new()
        .description(description)
        .content(
            "application/json",
            ContentBuilder::new()
                .schema(Some(Ref::from_schema_name("ErrorBody")))
                .build(),
        )
        .build()
}

/// With a token configured, every operation but `/healthz` needs it and may answer 401.
fn secure(document: &mut Document, token_required: bool) {
    if !token_required {
        return;
    }
    let components = document.components.get_or_insert_with(Default::default);
    components.add_security_scheme(
        BEARER,
        SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
    );
    let unauthorized = error("UNAUTHORIZED: missing or wrong bearer token.".into());
    for (path, item) in document.paths.paths.iter_mut() {
        if path == "/healthz" {
            continue;
        }
        for operation in operations(item) {
            operation.security = Some(vec![SecurityRequirement::new(BEARER, Vec::<String>::new())]);
            operation
                .responses
                .responses
                .insert("401".into(), unauthorized.clone().into());
        }
    }
}

fn operations(item: &mut PathItem) -> impl Iterator<Item = &mut utoipa::openapi::path::Operation> {
    [&mut item.get, &mut item.post]
        .into_iter()
        .filter_map(Option::as_mut)
}
