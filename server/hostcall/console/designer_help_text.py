# ruff: noqa: E501, RUF001  (translated sentences read better unbroken; Japanese punctuation)
"""The designer's Help tab in the console's four languages (merged into text.TEXT): what each
kind of tool is for, and its example (static/designer_help.js)."""

from __future__ import annotations

DESIGNER_HELP_TEXT = {
    "en": {
        "help_tabs": "The new tool",
        "help_fields_tab": "Fields",
        "help_tab": "Help",
        "help_example": "An example:",
        "help_use_example": "Use this example",
        "help_client": "A client-side tool runs in the host page: the page's handler answers it, else the visitor's form. The input schema says what the model sends; the output schema what the page answers.",
        "help_http": "A server-side HTTP tool makes one request from the server. Its URL, query, headers and body are templates; {{ $fromAI.key }} is a parameter the model provides, declared in the AI parameters and checked before the request. The URL's host must be one of the environment's allowed targets.",
        "help_block": "An installed node runs a block one of this server's packages provides; its config is started from the block's schema, and AI parameters fill it as for an HTTP tool.",
        "help_mcp": "An MCP server's tools: choose a server the environment allows, show its tools and choose some or all. The server's own names, descriptions and schemas come with them.",
        "help_mcp_example": "Use this example chooses the first server the environment allows and, once its tools are listed, its first tool.",
    },
    "fr": {
        "help_tabs": "Le nouvel outil",
        "help_fields_tab": "Champs",
        "help_tab": "Aide",
        "help_example": "Un exemple :",
        "help_use_example": "Appliquer cet exemple",
        "help_client": "Un outil côté client s’exécute dans la page hôte : son gestionnaire y répond, sinon le formulaire du visiteur. Le schéma d’entrée dit ce que le modèle envoie ; celui de sortie, ce que la page répond.",
        "help_http": "Un outil HTTP côté serveur fait une requête depuis le serveur. Son URL, ses paramètres, en-têtes et corps sont des modèles ; {{ $fromAI.cle }} est un paramètre fourni par le modèle, déclaré dans les paramètres de l’IA et vérifié avant la requête. L’hôte de l’URL doit être une des cibles autorisées de l’environnement.",
        "help_block": "Un nœud installé exécute un bloc fourni par un paquet de ce serveur ; sa configuration part du schéma du bloc, et les paramètres de l’IA la remplissent comme pour un outil HTTP.",
        "help_mcp": "Les outils d’un serveur MCP : choisissez un serveur que l’environnement autorise, affichez ses outils et choisissez-en certains ou tous. Leurs noms, descriptions et schémas viennent du serveur.",
        "help_mcp_example": "Appliquer cet exemple choisit le premier serveur que l’environnement autorise puis, une fois ses outils listés, son premier outil.",
    },
    "es": {
        "help_tabs": "La nueva herramienta",
        "help_fields_tab": "Campos",
        "help_tab": "Ayuda",
        "help_example": "Un ejemplo:",
        "help_use_example": "Usar este ejemplo",
        "help_client": "Una herramienta del lado del cliente se ejecuta en la página anfitriona: la responde su manejador, si no el formulario del visitante. El esquema de entrada dice lo que envía el modelo; el de salida, lo que responde la página.",
        "help_http": "Una herramienta HTTP del lado del servidor hace una petición desde el servidor. Su URL, consulta, cabeceras y cuerpo son plantillas; {{ $fromAI.clave }} es un parámetro que da el modelo, declarado en los parámetros de la IA y comprobado antes de la petición. El host de la URL debe ser uno de los destinos permitidos del entorno.",
        "help_block": "Un nodo instalado ejecuta un bloque que da un paquete de este servidor; su configuración parte del esquema del bloque, y los parámetros de la IA la completan como en una herramienta HTTP.",
        "help_mcp": "Las herramientas de un servidor MCP: elija un servidor que el entorno permita, muestre sus herramientas y elija algunas o todas. Sus nombres, descripciones y esquemas vienen del servidor.",
        "help_mcp_example": "Usar este ejemplo elige el primer servidor que el entorno permite y, una vez listadas sus herramientas, su primera herramienta.",
    },
    "ja": {
        "help_tabs": "新しいツール",
        "help_fields_tab": "項目",
        "help_tab": "ヘルプ",
        "help_example": "例：",
        "help_use_example": "この例を使う",
        "help_client": "クライアント側ツールはホストページで実行されます。ページのハンドラーが応答し、なければ訪問者のフォームが応答します。入力スキーマはモデルが送るもの、出力スキーマはページが返すものです。",
        "help_http": "サーバー側 HTTP ツールはサーバーから 1 回リクエストを送ります。URL・クエリ・ヘッダー・本文はテンプレートで、{{ $fromAI.key }} はモデルが渡すパラメーターです（AI パラメーターで宣言し、リクエスト前に検証）。URL のホストは環境の許可された宛先のいずれかである必要があります。",
        "help_block": "インストール済みノードは、このサーバーのパッケージが提供するブロックを実行します。設定はブロックのスキーマから始まり、AI パラメーターで HTTP ツールと同じように埋められます。",
        "help_mcp": "MCP サーバーのツール：環境が許可するサーバーを選び、ツールを表示して一部またはすべてを選びます。名前・説明・スキーマはサーバーのものです。",
        "help_mcp_example": "「この例を使う」は、環境が許可する最初のサーバーを選び、ツールの一覧が読み込まれたら最初のツールを選びます。",
    },
}
