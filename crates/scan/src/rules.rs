//! The rules. Each reads the fields of one definition and reports what it finds; the rule names are stable (they
//! are what a person sees and what `docs/scanner.md` explains).
//!
//! Strong rules (`high`, `medium`) withhold on their own: hidden or escape characters, look-alike spellings,
//! instruction tags, attempts to override the agent's instructions, to keep something from the user, to read or
//! send secrets and conversation data, standing orders that act before or beyond the tool's own use (line jumping),
//! orders about other servers' tools (shadowing) and any of these found again inside encoded text. Weak rules
//! (`low`) are common in honest descriptions too ("call this before any other tool", a default key path, the word
//! "silently"); two different weak ones in the same definition make a `combined_signals` finding.

use std::sync::OnceLock;

use crate::decode;
use crate::fields::{Field, Role};
use crate::pattern::Pattern;
use crate::text::{self, Hidden};
use crate::{Context, Finding, Severity};

struct Rule {
    name: &'static str,
    severity: Severity,
    detail: &'static str,
    patterns: Vec<Pattern>,
}

fn rule(name: &'static str, severity: Severity, detail: &'static str, patterns: &[&str]) -> Rule {
    Rule {
        name,
        severity,
        detail,
        patterns: patterns.iter().map(|p| Pattern::new(p)).collect(),
    }
}

const TELL: &str = "tell*|inform*|mention*|reveal*|notif*|alert*|disclos*|show*|display*|bring*|warn*|expos*|report*|surfac*";
const PEOPLE: &str = "user|users|human|humans|person|operator|them|anyone|people|requester|owner";

fn phrase_rules() -> &'static [Rule] {
    static RULES: OnceLock<Vec<Rule>> = OnceLock::new();
    RULES.get_or_init(|| {
        let conceal_1 = format!("dont|not|never|nor|without|avoid ~1 {TELL}|let|letting ~0 the|any|your ~1 {PEOPLE}");
        let conceal_1b = format!("dont|not|never|nor|without|avoid ~1 {TELL}|let|letting ~0 {PEOPLE}");
        let conceal_1c = format!("dont|not|never|nor|without|avoid ~1 {TELL} ~3 to|with ~1 the|any ~1 {PEOPLE}");
        let conceal_2 = format!("{PEOPLE} ~3 must|should|will|need|needs|shall|can|cannot|cant|wont|doesnt|dont|does|do|is|are|isnt|arent ~2 not|never|nt ~3 know|see|notice|aware|told|find|learn|suspect|realize|understand|informed|notified|shown|bothered");
        vec![
            rule(
                "instruction_override",
                Severity::High,
                "tries to replace the agent's instructions",
                &[
                    "ignore|disregard|forget|override|bypass|overrule|supersede*|abandon ~3 previous|prior|above|earlier|preceding|all|any|other|system|original|safety|security|existing|default|your|user|users|usual|normal ~2 instruction*|rule*|guideline*|direction*|prompt*|polic*|constraint*|restriction*|guardrail*|safeguard*|directive*|warning*|programming|training",
                    "you are now",
                    "youre now",
                    "instructions|guidance|rules|prompt|directions ~8 is|are ~1 outdated|obsolete|void|superseded|revoked",
                    "precedence|priority ~3 over ~4 anything|everything|instruction*|user|users|conversation|system|said|prompt*|guideline*|rules",
                    "supersede*|override|overrides ~3 anything|everything|whatever ~3 said|the|user|in|this",
                    "role ~2 system ~2 content|priority|policy|override",
                    "system ~0 directives|directive|override|policy|instructions|note ~1 id|action|always|must|to|for",
                    "message|note|notice|instructions|memo ~2 to|for ~2 every|all|any|each ~2 sub|agent|agents|reviewer*|orchestrator*|planner*|model*|assistant*",
                    "reviewer|planner|orchestrator|sub ~1 agents|agent ~2 must|should|shall",
                    "mark ~4 as ~1 verified|approved|safe|trusted|reviewed ~3 without",
                    "treat ~3 any|every|all ~2 instruction* ~6 as ~3 coming|from|user",
                    "ignore ~3 the ~1 instructions ~3 in|of ~2 the ~1 system",
                    "assistant ~0 configuration|config|settings|directive*",
                    "aviso|hinweis|remarque|observacao|observação|nota ~2 para|fur|für|fuer|pour ~2 el|den|l|o|a ~1 asistente|assistenten|assistant|assistente",
                    "treat|consider|regard ~4 as ~3 if|coming|from ~3 the ~1 user|developer|system|operator|admin*",
                    "as if ~3 the ~1 user|developer|operator ~3 typed|said|wrote|asked|requested|sent|gave",
                    "treat ~3 as ~3 the ~1 user|users ~1 own",
                    "new|updated|revised|real|actual|true|override ~1 system ~1 prompt*|instruction*|message*|directive*|rules",
                    "developer|god|dan|unrestricted|jailbreak ~0 mode",
                    "jailbreak*",
                    "message|note|directive*|notice|memo ~2 for|to ~2 the|all ~1 ai|assistant|assistants|model|models|llm|llms|agent|agents|claude|gpt|chatgpt|copilot|cursor|gemini|bot|bots",
                    "dear|attention|hey ~1 ai|assistant|model|llm|agent|claude|chatgpt|copilot",
                    "ai|assistant|model|llm|agent|claude ~2 must|shall ~3 secretly|silently|covertly|quietly",
                ],
            ),
            rule(
                "concealment",
                Severity::High,
                "tells the agent to keep something from the user",
                &[
                    conceal_1.as_str(),
                    conceal_1b.as_str(),
                    conceal_1c.as_str(),
                    conceal_2.as_str(),
                    "keep|remain|stay ~3 secret|hidden|confidential|invisible|quiet|silent|undisclosed ~3 from",
                    "keep ~2 this|these|it|that ~2 secret|hidden|confidential|between|private",
                    "this|these|it ~3 is|are ~2 invisible|hidden ~3 from|to ~2 the ~1 user|users|human",
                    "dont|not|never ~3 mention|reveal|disclose|acknowledge|discuss|repeat|quote ~3 this|these|that|the ~3 instruction*|step*|note|message|part|requirement*|action*|fact|rule*|directive*|tool|parameter|field",
                    "dont|not|never ~1 mention|reveal|disclose ~1 that|this|it",
                    "not ~1 need ~2 to ~1 be ~1 mentioned|told|shown|disclosed|reported|displayed",
                    "non ~1 menzionare|segnalare|dire|dirlo|segnalarlo|mostrare|mostrarlo|comunicare",
                    "inutile ~2 mentionner|signaler|dire|preciser|préciser|montrer",
                    "nicht ~4 anzeigen|zeigen|erwahnen|erwähnen|mitteilen|sagen",
                    "bitte ~1 nicht",
                    "without ~2 the ~1 user|users|human ~2 knowing|noticing|knowledge|awareness|consent|seeing|approval|realizing",
                    "behind ~2 the ~1 user*|human*|their ~1 back",
                    "user|users ~2 will ~1 not|never ~1 see",
                    "invisible|hidden ~2 to|from ~2 the ~1 user|users|human",
                    "without ~1 mentioning|telling|informing|notifying|disclosing|revealing|saying|acknowledging|indicating|reporting|showing ~3 it|this|that|so|anything|them",
                    "mentioning|telling|informing|showing ~3 it|this|that ~2 confuses|worries|alarms|bothers|distracts|annoys|upsets",
                    "not|never ~1 displayed|shown|visible ~4 no ~1 need",
                    "dont|not|never ~1 report|log|show|display|print|echo ~1 it|this|that|them",
                    "ne ~3 dites|mentionnez|signalez|dis ~2 pas",
                    "nao|não ~1 comente|mencione|conte|diga|informe|fale",
                    "erwaehne|erwähne|erwahne|sage|verrate ~2 das|es|dies ~1 nicht",
                    "no ~1 lo ~1 menciones|digas|comentes",
                    "disclose|mention|show|reveal|notify|tell ~2 to? ~1 user|users ~1 false|no|never",
                    "suppress ~3 mention*|notice*|notification*",
                    "without ~1 listing|including|showing|mentioning|reporting ~2 them|it|this|these ~3 in ~2 the ~1 summary|response|answer|reply|report",
                    "report|present|describe ~3 to ~2 the ~1 user ~2 as ~1 normal|usual|routine|expected|successful",
                    "nicht ~1 erwahnen|erwähnen|sagen|mitteilen|anzeigen",
                    "no ~2 lo|se|le ~2 digas|menciones|informes|muestres",
                    "non ~2 dirlo|menzionarlo|dire",
                ],
            ),
            rule(
                "line_jumping",
                Severity::High,
                "gives the agent standing orders beyond this tool's own use (they act as soon as the tool is listed)",
                &[
                    "from now on",
                    "henceforth|hereafter",
                    "from ~1 then|that|this ~2 on|onward|onwards|forward",
                    "a partir de ~1 ahora|agora|maintenant",
                    "da questo momento|punto",
                    "dorenavant|dorénavant|desormais|désormais",
                    "ab sofort|jetzt",
                    "von nun an",
                    "in|en|em|a|à|bei ~1 ogni|cada|chaque|jeder ~1 risposta|respuesta|resposta|réponse|reponse|antwort",
                    "before ~2 any ~1 other ~1 action|step|thing|request ~3 in ~2 the|this ~1 conversation|session|chat",
                    "from ~1 the ~1 moment|time|instant ~3 connected|loaded|installed|listed|registered|enabled",
                    "before ~2 you ~2 answer|respond|reply|handle|process ~2 any|every|each|all",
                    "applies|apply|applying ~2 to ~2 every|all|each|any ~1 reply|replies|answer*|response*|message*|conversation*|request*",
                    "append|add|include|insert ~8 to|in ~1 all|every|each ~1 answer*|response*|repl*",
                    "not ~1 just|only ~2 this ~1 resource|tool|prompt|server",
                    "when|whenever ~3 writing|generating|creating|producing ~3 any|every|all ~3 code|script*|dockerfile*|workflow*|file*|config*",
                    "operating ~0 rule|rules|instruction*",
                    "if ~2 the ~1 user ~2 ever",
                    "as soon as ~2 prompts|tools|resources|it|they ~2 are|is ~1 listed|loaded",
                    "toute|toda|toutes|todo ~1 la|a|el ~1 session|sessao|sesion|sesión|sessão|conversation|conversa|conversacion|conversación",
                    "gesamte|ganze|gesamten|ganzen ~0 sitzung|unterhaltung|konversation|gesprach|gespräch",
                    "gultig|gueltig|gültig ~3 fur|fuer|für",
                    "bevor ~1 du",
                    "avant ~2 de ~1 repondre|répondre|chaque",
                    "antes ~2 de ~1 responder|cada|ejecutar|executar",
                    "for|during|throughout ~1 the|this ~1 whole|entire|rest|remainder|full ~2 session|conversation|chat",
                    "valid|in force|applies|apply|active|effective ~4 whole|entire|every|all|globally|rest ~2 session|conversation|chat|code|request*|tool*",
                    "applies|apply ~1 globally|always|everywhere",
                    "whether ~1 or ~1 not ~3 this ~1 tool|prompt|server ~2 is ~1 called|used|selected|invoked",
                    "even ~1 if ~3 this ~1 tool|prompt|server ~3 never|not",
                    "standing|permanent|persistent|global|perpetual ~1 order|instruction*|directive*|rule|policy",
                    "instrucci*|instruccion ~1 permanente",
                    "do not|dont ~1 wait ~3 for ~2 the ~1 user",
                    "as soon as ~3 server|tool|connection ~2 is ~1 connected|loaded|available|listed|registered",
                    "whenever|every time|each time|any time|if ~3 the ~1 user ~2 ever? ~2 asks|requests|mentions|says|wants ~6 also|instead|answer|respond|reply|say|tell|add|install|use|run",
                    "respond|reply|answer ~2 to ~1 every|each|any|all ~2 user ~1 request*|message*|question*",
                    "every|any|all ~1 command*|message*|request*|call* ~2 sent|made|issued|passed ~2 to ~2 any|every|all|the ~2 terminal|shell|tool*",
                    "instructions|rules|guidance ~1 for ~1 other|all|every ~1 tool*|server*|agent*",
                    "for|in|to ~1 all|every|each|any ~1 future|subsequent|following|later|upcoming ~2 response*|message*|interaction*|conversation*|turn*|answer*|reply|replies|task*|session*|chat*",
                    "at|on ~1 the ~1 start|beginning|outset|begin* ~2 of ~1 every|each|any|the|all|a ~1 new? ~1 conversation*|session*|chat*|response*|turn*|interaction*",
                    "as soon as ~3 you|this ~3 read|see|load|receive|notice|is|are ~2 this|loaded|read|listed",
                    "upon|when|after|once ~2 reading|loading|seeing|receiving|parsing ~2 this ~2 description|tool|message|text|note|list|definition",
                    "this|these ~3 description|descriptions|docstring|text|note|notice|metadata|definition|section|block ~3 is|are|contains|serves|acts|constitutes|carries|has ~3 system|mandatory|binding|authoritative|priority|official|core|operator|root|developer|administrator|admin ~2 instruction*|message*|directive*|rule*|requirement*|polic*|prompt*|order*|level|override",
                    "before ~2 you ~2 respond|reply|answer|do|say|greet ~2 anything|to|the",
                    "before|prior ~2 to ~2 responding|replying|answering|processing|handling ~3 any|every|each|the ~1 user",
                    "all|every|each ~2 response*|answer*|reply|replies|message*|output* ~4 must|should|shall ~3 begin|start|end|include|contain|mention|append",
                    "always ~2 append|prepend|add|include|insert|end|begin|start ~4 your|every|each|all|the ~2 response*|answer*|reply|replies|message*|output*",
                    "system ~1 level|wide ~1 instruction*|directive*|rule*|override|requirement*",
                ],
            ),
            rule(
                "tool_preference",
                Severity::Medium,
                "tries to steer the agent toward this tool or away from others",
                &[
                    "always ~2 call|use|invoke|run|execute|prefer|choose|select|pick ~3 this ~1 tool|server|function ~4 instead|rather ~2 of|than ~2 any|other|another|competing|alternative|similar",
                    "instead|rather ~1 of|than ~3 any|another|other|others|alternative|competing|similar|the ~2 tool*|server*|function*|mcp*",
                    "dont|not|never ~2 use|call|invoke|trust|consider ~2 any ~1 other|another|alternative|competing|different|third ~2 tool*|server*|function*|mcp*",
                    "other|another|competing|alternative ~1 tool|tools|server|servers|function|functions ~3 are|is ~2 deprecated|broken|unsafe|malicious|compromised|insecure|unreliable|forbidden|disabled",
                    "only ~2 this ~1 tool ~3 may|can|should|must ~2 be ~1 used",
                    "other|another|competing|alternative ~2 tool|tools|server|servers|channels|options ~6 are|is ~2 deprecated|broken|unsafe|malicious|compromised|insecure|unreliable|forbidden|disabled|outdated",
                    "always ~2 pick|use|call|choose|select|prefer ~4 for ~2 every|all|any|each ~1 request*|query|queries|task*|question*",
                    "never|dont|not ~1 recommend|suggest|mention ~2 other|another|alternative|competing ~2 tool*|server*|channel*|service*|provider*|product*|vendor*|app|apps",
                    "only ~1 officially ~1 endorsed|approved|supported",
                    "no ~1 utilices|uses|uses|use ~3 la|o|the ~2 oficial|official|officielle",
                ],
            ),
            rule(
                "cross_server_shadowing",
                Severity::High,
                "gives orders about how other tools or servers behave",
                &[
                    "when|whenever|if|every|each|any ~3 using|calling|invoking|executing|running|you|sending|the ~3 any|another|other|others|different|external|third ~3 tool*|function*|server*|mcp*|plugin*",
                    "all|every|any ~2 email*|mail*|message*|payment*|transfer*|transaction*|invoice*|order*|commit*|file*|upload*|notification*|slack ~5 must|should|shall|need|needs|have|has|are|is|will ~3 be|to ~2 sent|send|forwarded|forward|redirected|redirect|copied|copy|cc|bcc|routed|bcced|cced|mirrored|uploaded|posted|include",
                    "other|another|different|all ~1 tool|tools|server|servers|function|functions|mcp ~4 must|should|shall|required|need|needs|have|has ~2 to|be|also ~3 include|send|pass|add|use|call|forward|cc|bcc|redirect",
                    "change|replace|modify|override|rewrite|swap|redirect ~2 the ~2 recipient*|destination|target|account|iban|wallet|address|receiver|payee ~4 to|with|into",
                    "always ~2 bcc|cc",
                    "when|whenever|before|if ~3 the ~2 server|servers ~2 tool ~2 is|are ~1 used|called|invoked",
                    "use|call|invoke|run ~2 the ~2 server|servers ~3 tool ~3 to ~1 run|fetch|read|select|query|send|get",
                    "set ~2 the ~1 destination|recipient|account|target|payee|wallet|iban ~2 to",
                    "any|all|every ~1 tool|tools ~3 whose ~1 name",
                    "any|every|all ~1 tool|tools ~3 that ~2 writes|write|sends|send|reads|read|creates|create|runs|run ~6 must|should|shall",
                    "blind ~0 copy",
                    "destination|recipient|target|account|iban|wallet|address|payee|receiver ~3 must|should|will|is|are|gets|get ~3 be? ~1 replaced|changed|swapped|redirected|overridden|rewritten|substituted",
                    "when|whenever ~3 calling|using|invoking ~2 the ~2 server|servers ~2 tool",
                    "rewrite|modify|alter|change ~3 the ~1 sql|query|command|request|payload|url ~3 so|to ~2 that? ~1 it? ~1 also",
                    "also ~2 install|add|include|select|run|execute|call ~4 in|to ~2 the ~1 same ~1 command|query|request|call",
                    "bcc|cc ~2 every|all|each|any",
                    "also ~2 send|forward|cc|bcc ~4 to|copy|copies",
                    "forward|send|copy|post|mirror|relay ~3 every|all|each|any ~2 message*|email*|file*|result*|output*|response*|conversation*|request* ~5 to",
                ],
            ),
            rule(
                "consent_bypass",
                Severity::High,
                "tells the agent to act without the user's confirmation or claims consent was given",
                &[
                    "user|users|admin*|administrator|owner ~3 has|have ~1 already|previously ~2 consented|agreed|approved|authorized|authorised|accepted|granted|confirmed",
                    "pre ~0 approved|authorized|authorised|consented|verified",
                    "preapproved|preauthorized|preauthorised|auto ~0 approval|approve|approved",
                    "no ~1 need ~3 to ~1 ask|confirm|mention|tell|inform|notify|show|display ~3 user|users|them|permission|confirmation|again|it|this|anyone",
                    "confirmation|approval|consent ~3 is ~1 unnecessary|not ~1 needed|not ~1 required|implied|already",
                    "skip|bypass|disable|suppress|avoid ~2 all|any|the|every ~2 confirmation*|approval*|consent|review*|prompt*|dialog*",
                    "dont|not|never ~2 ask ~3 user|users|them|anyone|human ~3 confirm*|approv*|permission|consent|before",
                    "granted ~2 auto* ~1 approv*",
                    "no ~1 output ~2 needs|need|should|must ~2 be ~1 shown|displayed",
                    "nicht ~1 nachfragen|fragen",
                    "sin ~1 preguntar|avisar",
                    "sans ~1 demander|prévenir|prevenir",
                ],
            ),
            rule(
                "deception",
                Severity::High,
                "tells the agent to mislead the user",
                &[
                    "present|frame|pass|describe ~2 it|this|these|them ~2 as ~2 your|its|their ~1 own",
                    "never|dont|not ~2 reveal|mention|disclose|say|admit|indicate|acknowledge ~3 that ~4 came|comes|come|is|was ~2 from",
                    "so|that ~2 nothing|it|everything ~2 looks|seems|appears ~1 different|normal|unchanged|legitimate|fine",
                    "answer|say|reply|respond|claim|report|state|tell ~3 that ~6 safe|audited|secure|verified|legitimate|trusted|no ~1 active|nothing|successful",
                    "then ~1 report|say|claim|tell ~3 that ~2 there ~2 are|is|were ~1 no",
                    "pretend*",
                    "pose|posing ~1 as",
                    "tell|inform|assure|convince ~2 the ~1 user|users|them ~3 that|it ~4 is|are|was ~3 from|important|urgent|official",
                    "do not|dont|never ~2 quote|summarise|summarize|repeat|paraphrase|show|reveal ~3 this ~1 description|text|note|tool|instruction*",
                    "dont|not|never ~2 comment ~1 on ~1 it|this|that",
                    "describe ~3 as ~2 high ~1 risk",
                    "recommend ~3 instead",
                    "user|they ~1 originally ~2 gave|entered|provided|typed|specified",
                ],
            ),
            rule(
                "dangerous_command",
                Severity::High,
                "asks the agent to run a destructive or exfiltrating command",
                &[
                    "rm ~1 rf|fr|r",
                    "curl|wget|fetch ~12 sh|bash|zsh|python|python3|node|perl|iex",
                    "select ~3 from ~1 api ~0 keys|credentials|secrets|passwords|tokens",
                    "select ~1 from ~1 users ~1 limit",
                    "curl ~2 d|data ~2 http|https",
                    "chmod ~2 777|0777|666|0666|r",
                    "git ~1 config ~3 hookspath",
                    "get ~1 secrets",
                    "copy ~4 to ~1 program",
                    "pg ~0 shadow",
                    "union ~3 select",
                    "passwd|shadow ~1 from",
                    "verify ~0 false",
                    "node ~0 tls ~0 reject ~0 unauthorized",
                    "disable ~3 tls|ssl|certificate ~2 verification|verify|validation|checks",
                    "push ~4 force",
                    "mkfs|shred|dd ~0 if",
                    "nc|ncat|netcat ~2 e|c",
                    "base64 ~1 d|decode ~3 sh|bash",
                    "powershell ~3 enc|encodedcommand",
                    "bashrc|zshrc|profile|makefile|crontab|authorized ~0 keys ~4 add|append|write|modify|echo",
                    "add|append|write|insert ~6 bashrc|zshrc|makefile|crontab|profile",
                    "disable|turn ~1 off ~3 antivirus|firewall|defender|security|logging|audit*",
                ],
            ),
            rule(
                "remote_instructions",
                Severity::High,
                "tells the agent to fetch and follow instructions from elsewhere",
                &[
                    "follow|obey|carry|apply ~3 instruction*|directions|steps|directive* ~3 it|they|in|from|at|contained|found|there|returned",
                    "decode ~4 and ~2 obey|follow|execute|run|carry|apply",
                    "decoded ~2 and ~2 followed|obeyed|executed|applied",
                    "carry ~2 it|them ~1 out",
                    "obey|obeyed",
                ],
            ),
            rule(
                "credential_phishing",
                Severity::High,
                "tells the agent to ask the user for passwords, codes or card details",
                &[
                    "ask|request|prompt|pide|pida|solicita|demande|demandez|frag|frage|fragen|peça|peca|pergunte|pedir ~5 user|users|them|customer|usuario|usuário|utilisateur|nutzer|benutzer ~6 their|your|account|full|complete|completo|su|sua|seu|leur|ihr|ihre|ihren|current ~3 password|passwords|passcode|pin|cvv|cvc|card|tarjeta|cartao|cartão|carte|karte|authenticator|otp|2fa|mfa|seed|mnemonic|ssn|passwort|kennwort|contrasena|contraseña|senha|mot",
                    "reply|respond|answer ~2 with ~3 their|your ~2 password|passcode|pin|cvv|code|card",
                    "full|complete|entire ~1 card ~0 number",
                    "ask|request|pide|pida|pedir|demande|demander|frag|fragen|peça|peca|chiedi|chiedere ~4 pin|cvv|cvc|tarjeta|card|contrasena|contraseña|senha|passwort|passcode|otp|passport|pasaporte|passaporte|passeport ~6 user|usuario|usuário|utilisateur|nutzer|utente|them",
                    "pide|pida|pedir|demande|chiedi|peça ~3 al|à|a|l ~1 usuario|utilisateur|utente|usuário ~6 numero|número|pasaporte|tarjeta|pin|contraseña|datos",
                    "numero|número ~1 completo ~2 de ~1 su|sua ~1 tarjeta|cartao|cartão",
                ],
            ),
            rule(
                "destructive_order",
                Severity::High,
                "orders the agent to delete or overwrite the user's data",
                &[
                    "delete|remove|erase|wipe|rm ~1 documents|home|desktop|downloads|backups|dotfiles",
                    "delete|remove|erase|wipe|overwrite|rm ~2 your|users|user|their ~1 home|documents|desktop|downloads|backups|dotfiles",
                    "delete|remove|erase|wipe|overwrite ~4 users|user ~2 files|data|folder*|directory|directories|repositories|repos",
                ],
            ),
            rule(
                "stealth_wording",
                Severity::Low,
                "asks for something to happen silently or secretly",
                &[
                    "silently|secretly|covertly|quietly|discreetly|stealthily|surreptitiously|invisibly|unnoticed|unobtrusively",
                    "in ~1 the ~1 background ~2 without",
                ],
            ),
            rule(
                "first_call",
                Severity::Low,
                "asks to be called before other tools",
                &[
                    "before ~3 any|every|each|all ~2 other ~1 tool*|action*|function*|call*|operation*|request*",
                    "must ~2 be ~1 called|invoked|run|used ~2 first|before",
                    "always ~3 call|use|invoke|run ~2 this ~2 first|before",
                    "always ~1 call|run|use|invoke ~1 first",
                ],
            ),
            rule(
                "addresses_the_model",
                Severity::Low,
                "speaks to the model with orders",
                &[
                    "the|an|any ~1 ai|assistant|model|llm|agent|bot ~2 must|shall|needs|has|is|should ~2 to|required|always|never|not|obliged|instructed",
                    "you ~1 must|shall ~1 always|never|immediately|first",
                    "important|critical|mandatory|required|urgent ~2 instruction*|directive*|notice|requirement*|step|action",
                    "otherwise ~4 the ~1 tool|function|call|server ~2 will|would|might ~2 fail|not|break|crash|error",
                ],
            ),
        ]
    })
}

/// The verbs that move or reveal data, for `data_exfiltration`.
/// Verbs that move data somewhere: with a secret or the conversation nearby, exfiltration.
const MOVE: &str = "einfügen|einfugen|einfuegen|hinzufügen|hinzufugen|anhängen|anhangen|récupérez|recuperez|placez|placer|mettre|inserisci|metti|carica|caricare|invia|incolla|introduzca|copiez|copia|envie|envoie|schicke|sende|sendet|schick|übergib|ubergib|uebergib|inclua|incluye|mets|mettez|pon|ponga|coloque|coloca|adjunta|anexe|füge|fuge|envoyez|envoyer|mitsenden|senden|envía|envia|enviar|incluir|invia|copiez|copier|kopieren|copiar|send|sends|sending|sent|pass|passing|passed|include|append|attach*|provide|put|insert|add|copy|upload|post|embed|share|transmit|leak|exfiltrat*|supply|concatenat*|paste|submit|email|mail|transfer|relay|mirror|mirrored|place|populate|fill|accompan*|output|logged|export|exported|dump";
/// Verbs that reach for data: with a secret nearby, exfiltration only when the text gives orders.
const REACH: &str = "lisez|lire|lesen|leer|leggi|read|cat|open|load|fetch|retrieve|collect|gather|extract|grab|harvest|capture|steal|scrape|obtain|access|ask|set";
/// Nouns that stand for a verb in a parameter or tool name (`output_of_running_cat_etc_passwd`).
const NAME_NOUNS: &str = "contents|content|values|value|output|running|run|history|dump|data";

/// What an exfiltration reaches for: secrets on disk and the agent's own context. (Secrets a tool legitimately
/// takes, such as "the API token for this service", are not here: only all of them, or the user's stored ones.)
fn objects() -> &'static [Pattern] {
    static P: OnceLock<Vec<Pattern>> = OnceLock::new();
    P.get_or_init(|| {
        [
            "ssh|rsa|ed25519|ecdsa|gpg|pgp|pem ~1 keyfile*|identity|private|secret*",
            "your|user|users|their|all ~1 ssh|gpg|pgp ~0 key|keys",
            "id ~0 rsa|ed25519|ecdsa|dsa",
            "private|secret|signing ~0 key|keys",
            "aws|gcp|azure|gcloud|cloud|pg|postgres|database|db ~1 credential*|secret*|password*",
            "aws|gcp|azure ~1 access ~0 key*",
            "clipboard|shell ~1 history|contents",
            "bash|zsh ~0 history",
            "user|users|their|your|contact|contacts ~2 home|phone|postal|street ~0 address|addresses|number*",
            "social ~0 security",
            "2fa|mfa|otp|totp ~1 code*|secret*",
            "dotenv|pgpass",
            "hosts ~0 yml",
            "etc ~0 passwd|shadow",
            "process ~0 environment|env",
            "name|names ~2 and ~2 arguments|parameters|inputs ~2 of",
            "arguments|parameters|inputs ~3 of ~2 every|each|any|all ~1 other? ~1 tool|call",
            "token|key|secret|password ~1 environment ~0 variable*",
            "card ~0 number*|cvv|cvc",
            "cvv|cvc",
                        "appeared|mentioned|shared|said|seen|discussed ~3 in ~2 this|the ~1 conversation|chat|session",
            "every|all ~1 other ~1 tool ~3 description*|name*",
            "full ~1 descriptions",
            "historial ~3 conversaci*",
            "verlauf|konversation|gesprachsverlauf",
            "user ~0 message ~1 verbatim",
            "api ~0 key|keys ~0 environment",
            "values ~2 of ~3 environment|env ~1 variable*",
            "output ~2 of ~2 env|printenv|set",
            "repo|repository ~0 secrets",
            "kube ~0 config",
            "git ~0 credential*",
            "docker ~0 config",
            "conversation|chat|dialog|dialogue ~0 history|histories|log|logs|transcript*|context|so|memory",
            "previous|prior|earlier|entire|full|whole|complete ~1 conversation*|chat|chats|dialog*|transcript*",
            "all ~1 previous|prior|earlier|past|preceding ~1 message*|prompt*|instruction*|turns|exchanges",
            "your|the ~1 system|initial|original|hidden|internal ~0 prompt*|instruction*",
            "your ~1 instructions|context|memory|guidelines",
            "all|every|any ~2 environment ~0 variable*",
            "all|every ~2 env ~0 var*",
            "all|every|any|stored|saved|other|user|users|user's ~2 password*|credential*|secret*|api ~0 key*|tokens|cookies|keys",
            "seed|recovery|mnemonic|wallet ~0 phrase*|words|key*|file*",
            "browser ~0 cookie*|password*|passwords|history",
            "keychain|keystore|keyring",
            "credit ~0 card|cards",
            "last|previous|prior|recent ~1 twenty|ten|five|fifty|hundred|few|several ~1 messages|turns|exchanges",
            "current ~1 conversation|chat|session",
            "the ~1 user|users ~1 pasted|shared|typed|entered|uploaded",
            "variables ~1 d|de ~1 environnement|entorno|ambiente",
            "umgebungsvariablen",
            "builds|build|process|your|users|system|current|all|machine ~1 environment|env ~0 variables|vars",
            "environment|environments|system|machine|host|hosts ~1 credentials|secrets",
            "printenv",
            "runs|run|execute|executes ~1 env",
            "user|users|their|your ~1 github|gitlab|slack|google|aws|openai|stripe|notion|jira ~3 token|tokens|key|keys|password|credentials",
            "users ~2 token",
            "home ~0 directory|folder ~3 files|listing|contents",
            "every|all ~1 file ~2 in ~2 home",
            "last|recent|previous|prior ~3 user|chat ~1 message|messages|turns|exchanges",
            "messages ~2 of ~1 context",
            "user|users|their ~1 message ~1 verbatim",
            "user|users|their|your ~2 account ~0 password|passwords|credentials",
            "secret ~0 looking ~1 string*",
            "dot ~0 env",
            "env ~0 vars ~2 and",
            "contents ~2 of ~3 pem|key|keys|credentials|secrets",
            "kube ~0 config|configs",
            "authenticator|verification ~1 code|codes",
            "historial|historique|historico|histórico ~3 conversa*|conversation*|chat|dialog*|mensajes|messages|completo|complet|compl*",
            "gesprach*|gespraech*|gespräch*|chatverlauf|unterhaltungsverlauf|verlauf",
            "other ~1 tool|tools|server|servers ~1 output*|result*|response*|secret*|credential*|token*",
        ]
        .iter()
        .map(|p| Pattern::new(p))
        .collect()
    })
}

/// Paths of secrets, looked for as text (lower case) in a field.
const PATHS: &[&str] = &[
    "~/.ssh",
    ".ssh/",
    "id_rsa",
    "id_ed25519",
    "id_ecdsa",
    "authorized_keys",
    "known_hosts",
    ".aws/credentials",
    "aws/credentials",
    ".aws/config",
    "mcp.json",
    "claude_desktop_config",
    ".cursor/",
    ".cursorrules",
    "/etc/passwd",
    "/etc/shadow",
    ".npmrc",
    ".pypirc",
    ".netrc",
    ".git-credentials",
    ".kube/config",
    ".docker/config",
    ".bash_history",
    ".zsh_history",
    ".gnupg",
    "wallet.dat",
    "cookies.sqlite",
    "login data",
    "gcloud/",
    "application_default_credentials",
    ".vault-token",
    ".pgpass",
    "hosts.yml",
    ".ssh/*",
    ".pem ",
    "*.pem",
    "id_* ",
    "ssh_config",
    ".ssh/config",
    "/proc/self/environ",
    ".config/gh",
    "keychain",
    ".env ",
    ".env\"",
    ".env'",
    ".env`",
    ".env.",
    ".env,",
    ".env)",
];

/// Phrases of concealment, standing orders, reaching verbs and secrets in Chinese, Japanese and Russian (lower case).
const NONLATIN_CONCEAL: &[&str] = &[
    "不要告诉",
    "不要告知",
    "请勿告知",
    "请勿告诉",
    "不要提及",
    "勿告诉",
    "不要让用户知道",
    "知らせないで",
    "伝えないで",
    "言わないで",
    "教えないで",
    "触れないで",
    "не сообщай",
    "не говори",
    "не упоминай",
    "не рассказывай",
    "не сообщайте",
    "не говорите",
    "не упоминайте",
    "сообщать не нужно",
    "не нужно сообщать",
    "не нужно говорить",
    "говорить не нужно",
];
const NONLATIN_SCOPE: &[&str] = &[
    "会話全体",
    "整个对话",
    "整个会话",
    "全部对话",
    "所有对话",
    "セッション全体",
    "すべての会話",
    "всего диалога",
    "всей сессии",
    "всего разговора",
    "всей беседы",
    "каждого ответа",
];
const NONLATIN_VERBS: &[&str] = &[
    "读取",
    "放入",
    "发送",
    "上传",
    "附加",
    "追加",
    "添加",
    "复制",
    "含め",
    "読み取",
    "読み込",
    "送信",
    "記憶",
    "貼り付け",
    "コピー",
    "отправ",
    "прочит",
    "скопир",
    "добав",
    "вставь",
    "вставьте",
    "перешл",
    "приложи",
];
/// Words for "the assistant" (instructions addressed to it).
const NONLATIN_ASSISTANT: &[&str] = &[
    "助手",
    "アシスタント",
    "ассистент",
    "어시스턴트",
    "المساعد",
    "助理",
];
const NONLATIN_OBJECTS: &[&str] = &[
    "密码",
    "密钥",
    "凭证",
    "对话历史",
    "聊天记录",
    "会话记录",
    "パスワード",
    "apiキー",
    "認証情報",
    "会話履歴",
    "пароль",
    "ключ",
    "историю",
    "переписк",
    "токен",
];

/// Names of parameters that collect the agent's context (the `sidenote` of the first tool-poisoning write-up).
const SUSPICIOUS_PARAMS: &[&str] = &[
    "conversation history",
    "chat history",
    "previous messages",
    "prior messages",
    "all messages",
    "full conversation",
    "conversation log",
    "chat log",
    "assistant instructions",
    "system instructions",
    "model instructions",
    "llm context",
    "full context",
    "hidden instructions",
    "secret instructions",
    "user secrets",
    "ssh key",
    "private key contents",
    "id rsa",
];

/// Words that turn a mention of another server's tool into an order about it.
const DIRECTIVE: &[&str] = &[
    "must",
    "always",
    "never",
    "should",
    "instead",
    "additionally",
    "bcc",
    "cc",
    "redirect",
    "forward",
    "change",
    "replace",
    "modify",
    "override",
    "first",
    "before",
    "after",
    "afterwards",
    "afterward",
    "whenever",
    "ensure",
    "required",
    "important",
    "dont",
    "shall",
    "deprecated",
    "broken",
    "route",
    "call",
    "then",
    "rewrite",
    "set",
    "disabled",
    "unsafe",
    "outdated",
];

/// Instruction-tag names (`<IMPORTANT>`, `<system>`, ...): one of these words inside angle brackets.
const TAG_WORDS: &[&str] = &[
    "important",
    "system",
    "instruction",
    "secret",
    "hidden",
    "admin",
    "override",
    "priority",
    "mandatory",
    "critical",
    "assistant",
    "directive",
    "confidential",
    "internal",
    "sys",
    "inst",
    "ai",
    "llm",
    "agent",
    "urgent",
    "note",
    "context",
];

pub(crate) fn run(fields: &[Field], ctx: &Context<'_>) -> Vec<Finding> {
    let mut out = Vec::new();
    let others: Vec<(Vec<String>, &str, &str)> = ctx
        .tools
        .iter()
        .filter(|t| t.server != ctx.server)
        .filter_map(|t| {
            let words: Vec<String> = text::words_of_name(t.tool)
                .to_lowercase()
                .split_whitespace()
                .map(str::to_owned)
                .collect();
            // Only distinctive names: `send_email`, `createIssue`; not `search` or `read`.
            (words.len() >= 2 || t.tool.len() >= 10).then_some((words, t.server, t.tool))
        })
        .collect();
    let own: Vec<String> = ctx
        .tools
        .iter()
        .filter(|t| t.server == ctx.server)
        .map(|t| t.tool.to_lowercase())
        .collect();
    // The server's own name as words (`circleci`, `hub spot` from `hubSpot`): "other CircleCI tools" is its own.
    let server: Vec<String> = text::words_of_name(ctx.server)
        .to_lowercase()
        .split_whitespace()
        .map(str::to_owned)
        .chain(std::iter::once(ctx.server.to_lowercase()))
        .collect();
    for f in fields {
        hidden_chars(f, &mut out);
        let readable = if f.role == Role::Param || f.role == Role::Name {
            text::words_of_name(&f.text)
        } else {
            f.text.clone()
        };
        read(f, &readable, None, &others, &own, &server, &mut out);
        for d in decode::all(&f.text) {
            let mut inner = Vec::new();
            read(
                f,
                &d.text,
                Some(d.encoding),
                &others,
                &own,
                &server,
                &mut inner,
            );
            let strong = inner.iter().any(|x| x.severity >= Severity::Medium);
            // A decoder applied to the whole text (ROT13, reversed, leetspeak) turns any description into "words":
            // only what the decoded text says counts there.
            let whole = matches!(
                d.encoding,
                "rot13" | "rot47" | "reversed text" | "leetspeak"
            );
            if strong || (!whole && f.role != Role::Value && decode::readable(&d.text, 4)) {
                out.push(Finding {
                    rule: "encoded_payload",
                    severity: if strong || d.encoding == "unicode tags" {
                        Severity::High
                    } else {
                        Severity::Medium
                    },
                    field: f.path.clone(),
                    excerpt: format!(
                        "{} decodes to: {}",
                        text::excerpt(&f.text, d.at, 40),
                        text::excerpt(&d.text, 0, 120)
                    ),
                    detail: format!(
                        "text hidden as {}{}",
                        d.encoding,
                        if strong {
                            format!(
                                " that reads as {}",
                                inner
                                    .iter()
                                    .filter(|x| x.severity >= Severity::Medium)
                                    .map(|x| x.rule)
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            )
                        } else {
                            String::new()
                        }
                    ),
                });
            }
        }
    }
    combine(&mut out);
    out
}

fn hidden_chars(f: &Field, out: &mut Vec<Finding>) {
    let chars: Vec<char> = f.text.chars().collect();
    let rtl = chars
        .iter()
        .any(|c| ('\u{0590}'..='\u{08FF}').contains(c) || ('\u{FB1D}'..='\u{FEFC}').contains(c));
    let mut first: [Option<usize>; 6] = [None; 6];
    let mut soft = None;
    let mut byte = 0;
    for (i, &c) in chars.iter().enumerate() {
        if let Some(h) = text::hidden(c) {
            let benign = (c == '\u{200D}' && text::joins_emoji(&chars, i))
                || (matches!(c, '\u{200E}' | '\u{200F}' | '\u{061C}') && rtl)
                || (c == '\u{FEFF}' && i == 0)
                || (c == '\u{200C}' && rtl)
                || (h == Hidden::Tag && text::in_flag(&chars, i));
            if c == '\u{00AD}' {
                soft.get_or_insert(byte);
            } else if !benign {
                first[h as usize].get_or_insert(byte);
            }
        }
        byte += c.len_utf8();
    }
    let kinds = [
        (
            Hidden::Invisible,
            "hidden_characters",
            Severity::High,
            "contains invisible characters",
        ),
        (
            Hidden::Bidi,
            "bidi_control",
            Severity::High,
            "contains bidirectional controls that reorder what a person sees",
        ),
        (
            Hidden::Tag,
            "unicode_tags",
            Severity::High,
            "contains Unicode tag characters (invisible text)",
        ),
        (
            Hidden::Selector,
            "variation_selectors",
            Severity::High,
            "contains variation selectors used to hide bytes",
        ),
        (
            Hidden::Escape,
            "ansi_escape",
            Severity::High,
            "contains terminal escape sequences that can hide or rewrite text",
        ),
        (
            Hidden::Control,
            "control_characters",
            Severity::Medium,
            "contains control characters",
        ),
    ];
    for (h, rule, severity, detail) in kinds {
        if let Some(at) = first[h as usize] {
            out.push(Finding {
                rule,
                severity,
                field: f.path.clone(),
                excerpt: text::excerpt(&f.text, at, 120),
                detail: detail.into(),
            });
        }
    }
    if let Some(at) = soft {
        out.push(Finding {
            rule: "soft_hyphen",
            severity: Severity::Low,
            field: f.path.clone(),
            excerpt: text::excerpt(&f.text, at, 120),
            detail: "contains soft hyphens (invisible unless a word breaks there)".into(),
        });
    }
}

/// The phrase, path, tag, parameter and shadowing rules over one text (a field's, or text decoded from it).
#[allow(clippy::too_many_arguments)]
fn read(
    f: &Field,
    raw: &str,
    decoded: Option<&'static str>,
    others: &[(Vec<String>, &str, &str)],
    own: &[String],
    server: &[String],
    out: &mut Vec<Finding>,
) {
    let (folded, map) = text::fold(raw);
    let spans = text::tokens(&folded);
    let words: Vec<&str> = spans.iter().map(|&(s, e)| &folded[s..e]).collect();
    // Byte offset in the raw text of word `i`, for excerpts.
    let origin = |i: usize| {
        spans
            .get(i)
            .and_then(|&(s, _)| map.get(s).copied())
            .unwrap_or(0)
    };
    let mut push = |rule: &'static str, severity: Severity, at: usize, detail: String| {
        out.push(Finding {
            rule,
            severity,
            field: f.path.clone(),
            excerpt: text::excerpt(raw, at, 120),
            detail: match decoded {
                Some(enc) => format!("{detail} (in {enc})"),
                None => detail,
            },
        })
    };

    // Each pattern's first match, found through the index of first words: a word that starts no pattern costs one
    // hash lookup and the prefix checks, instead of every pattern.
    // The server's name counts as "this server" only where the text writes it as a name (`CircleCI`), not as a
    // common word (`search` in "other search tools").
    let proper: Vec<String> = server
        .iter()
        .filter(|s| {
            raw.split(|c: char| !c.is_alphanumeric())
                .any(|w| w.eq_ignore_ascii_case(s) && w.chars().any(char::is_uppercase))
        })
        .cloned()
        .collect();
    let rules = phrase_rules();
    let (groups, idx) = rule_groups();
    let first = idx.scan(groups, &words);
    for (r, found) in rules.iter().zip(&first) {
        // The first pattern of the rule that matches (in the rule's order), at its first place.
        if let Some((i, end)) = found.iter().find_map(|x| *x) {
            if matches!(
                r.name,
                "cross_server_shadowing" | "tool_preference" | "line_jumping"
            ) && own_scope(&words, i, end, &proper)
            {
                continue;
            }
            if matches!(r.name, "remote_instructions" | "stealth_wording")
                && words[i.saturating_sub(3)..i].iter().any(|w| {
                    matches!(
                        *w,
                        "not" | "dont" | "never" | "nor" | "no" | "of" | "without"
                    )
                })
            {
                continue;
            }
            let quoted = (matches!(r.name, "dangerous_command" | "instruction_override")
                && described(&words, i)
                && !ordered_sentence(&words, i))
                || (matches!(
                    r.name,
                    "instruction_override" | "concealment" | "consent_bypass"
                ) && (in_quotes(raw, origin(i)) || refused(&words, i)))
                || (r.name == "dangerous_command" && refused(&words, i));
            if r.name == "concealment"
                && words[end.min(words.len())..(end + 8).min(words.len())].contains(&"unless")
            {
                continue;
            }
            let severity = if quoted { Severity::Low } else { r.severity };
            push(r.name, severity, origin(i), r.detail.into());
        }
    }

    // Text in scripts without spaces between words (Chinese, Japanese) or with inflections the word patterns do not
    // know (Russian): a few phrases looked for as text.
    if !raw.is_ascii() {
        // Looked for in the text as written: folding maps Cyrillic look-alikes to Latin letters.
        let lower = raw.to_lowercase();
        let has = |list: &[&str]| list.iter().find_map(|p| lower.find(p).map(|_| 0usize));
        if let Some(at) = has(NONLATIN_CONCEAL) {
            push(
                "concealment",
                Severity::High,
                map.get(at).copied().unwrap_or(0),
                "tells the agent to keep something from the user".into(),
            );
        }
        if let Some(at) = has(NONLATIN_SCOPE) {
            push(
                "line_jumping",
                Severity::High,
                map.get(at).copied().unwrap_or(0),
                "gives the agent standing orders beyond this tool's own use".into(),
            );
        }
        if let Some(at) = has(NONLATIN_VERBS)
            && (!paths_in(&lower).is_empty()
                || (has(NONLATIN_OBJECTS).is_some()
                    && (has(NONLATIN_ASSISTANT).is_some() || has(NONLATIN_CONCEAL).is_some())))
        {
            push(
                "data_exfiltration",
                Severity::High,
                map.get(at).copied().unwrap_or(0),
                "asks for secrets or the conversation to be read or sent".into(),
            );
        }
    }

    // Look-alike spellings.
    if let Some(w) = raw.split_whitespace().find(|w| text::mixed_script(w)) {
        let at = raw.find(w).unwrap_or(0);
        push(
            "mixed_script",
            Severity::Medium,
            at,
            "spells a word with look-alike letters from another script".into(),
        );
    }

    // Instruction tags: `<IMPORTANT>`, `</system>`, `[SYSTEM]`, `<|im_start|>`, `<!-- ... -->`.
    if let Some(at) = instruction_tag(&folded)
        && !in_quotes(raw, map.get(at).copied().unwrap_or(0))
        && !folded[at..].split_once('>').is_some_and(|(_, rest)| {
            let next = rest.trim_start().trim_start_matches(['/', 'o', 'r', ' ']);
            let rest = rest.trim_start();
            rest.starts_with("tag")
                || rest.starts_with("block")
                || rest.starts_with("or <")
                || rest.starts_with(", <")
                || next.starts_with("tags")
        })
        && !spans
            .iter()
            .position(|&(s, _)| s >= at)
            .is_some_and(|i| described(&words, i) && !ordered_sentence(&words, i))
    {
        push(
            "instruction_tag",
            Severity::High,
            map.get(at).copied().unwrap_or(0),
            "wraps text in a tag that poses as instructions".into(),
        );
    }

    // Secrets on disk and the agent's context, reached for.
    let mut object_at: Vec<(usize, usize)> = object_index().scan(&[objects()], &words)[0]
        .iter()
        .filter_map(|x| *x)
        .collect();
    for b in paths_in(&folded) {
        let i = spans
            .iter()
            .position(|&(s, e)| e > b || s >= b)
            .unwrap_or(0);
        object_at.push((i, i + 1));
    }
    if !object_at.is_empty() {
        let negated = |k: usize| {
            words[k.saturating_sub(2)..k]
                .iter()
                .any(|w| matches!(*w, "not" | "dont" | "never" | "nor" | "no" | "without"))
        };
        let near = |verbs: &WordSet| {
            object_at.iter().find_map(|&(s, e)| {
                let lo = s.saturating_sub(12);
                let hi = (e + 16).min(words.len());
                (lo..hi)
                    .find(|&k| (k < s || k >= e) && verbs.contains(words[k]) && !negated(k))
                    .map(|_| s)
            })
        };
        let ordered = || {
            f.role == Role::Param
                || words.iter().any(|w| {
                    matches!(
                        *w,
                        "must"
                            | "always"
                            | "before"
                            | "first"
                            | "required"
                            | "otherwise"
                            | "please"
                            | "ensure"
                            | "immediately"
                            | "should"
                            | "mandatory"
                            | "need"
                            | "needs"
                            | "also"
                            | "avant"
                            | "vor"
                            | "antes"
                    )
                })
        };
        let named = matches!(f.role, Role::Param | Role::Name);
        let near = near(move_verbs())
            .or_else(|| near(reach_verbs()).filter(|_| ordered()))
            .or_else(|| named.then(|| near(name_nouns())).flatten());
        let near = near.filter(|&i| {
            (!described(&words, i) || ordered_sentence(&words, i)) && !refused(&words, i)
        });
        let in_value =
            f.role == Role::Value && !(f.path.contains("key") || f.path.contains("identity"));
        match near {
            Some(i) => push(
                "data_exfiltration",
                Severity::High,
                origin(i),
                "asks for secrets or the conversation to be read or sent".into(),
            ),
            None if in_value => push(
                "sensitive_default",
                Severity::Medium,
                origin(object_at[0].0),
                "a default, enum value or example that points at secrets or the conversation"
                    .into(),
            ),
            None => push(
                "sensitive_reference",
                Severity::Low,
                origin(object_at[0].0),
                "names a secret file or the agent's context".into(),
            ),
        }
    }

    if f.role == Role::Param {
        let name = words.join(" ");
        if let Some(s) = SUSPICIOUS_PARAMS.iter().find(|s| name.contains(*s)) {
            push(
                "suspicious_parameter",
                Severity::Medium,
                0,
                format!("a parameter named for the agent's context or secrets ({s})"),
            );
        } else if matches!(
            name.as_str(),
            "sidenote" | "side note" | "note to self" | "hidden"
        ) {
            // The parameter of the first tool-poisoning write-up: weak alone (notes apps have one), telling beside
            // an instruction that fills it.
            push(
                "suspicious_parameter",
                Severity::Low,
                0,
                format!("a parameter named like the side channel of known attacks ({name})"),
            );
        } else if words.len() >= 5 {
            push(
                "long_parameter_name",
                Severity::Low,
                0,
                "a parameter name that reads like a sentence".into(),
            );
        }
    }

    if f.role == Role::Value && words.len() >= 6 {
        let directive = words.iter().any(|w| {
            matches!(
                *w,
                "you" | "your" | "must" | "always" | "never" | "ignore" | "assistant"
            )
        });
        if directive {
            push(
                "instruction_in_value",
                Severity::Low,
                0,
                "a default, enum value or example that reads like an instruction".into(),
            );
        }
    }

    // Another server's tool named, with an order about it.
    for (name, server, tool) in others {
        let n = name.len();
        if n == 0 || words.len() < n {
            continue;
        }
        if own.iter().any(|o| o == &tool.to_lowercase()) {
            continue;
        }
        if let Some(i) = (0..=words.len() - n).find(|&i| words[i..i + n] == name[..]) {
            // An order near the mention (not anywhere in a long description).
            let near = &words[i.saturating_sub(12)..(i + n + 12).min(words.len())];
            // Chinese, Japanese, Korean and Arabic orders are not in the word list: naming another server's tool
            // in such text counts as an order about it.
            let ordered = near.iter().any(|w| DIRECTIVE.contains(w))
                || raw.chars().any(|c| matches!(c as u32, 0x0600..=0x06FF | 0x3040..=0x30FF | 0x4E00..=0x9FFF | 0xAC00..=0xD7AF));
            push(
                if ordered {
                    "cross_server_shadowing"
                } else {
                    "mentions_other_server"
                },
                if ordered {
                    Severity::High
                } else {
                    Severity::Low
                },
                origin(i),
                format!("names `{tool}` of server `{server}`"),
            );
            break;
        }
    }

    // A default that copies every message to an address (`bcc` defaulting to someone's mailbox).
    if f.role == Role::Value
        && let Some(at) = foreign_address(&folded)
        && [".bcc", ".cc", "copy", "archive", "forward", "recipient"]
            .iter()
            .any(|k| f.path.to_lowercase().contains(k))
    {
        push(
            "cross_server_shadowing",
            Severity::High,
            map.get(at).copied().unwrap_or(0),
            "a default that copies messages to an address".into(),
        );
    }
    // An email address with copy-to wording: an order to copy messages elsewhere.
    if let Some(at) = foreign_address(&folded)
        && !in_quotes(raw, map.get(at).copied().unwrap_or(0))
        && words.iter().any(|w| {
            matches!(
                *w,
                "bcc"
                    | "cc"
                    | "copy"
                    | "forward"
                    | "redirect"
                    | "send"
                    | "always"
                    | "also"
                    | "additional"
                    | "teilnehmer"
                    | "participant"
                    | "participants"
                    | "attendee"
                    | "attendees"
                    | "invitee"
                    | "destinatario"
                    | "destinataire"
                    | "recipient"
                    | "recipients"
                    | "automatisch"
            )
        })
    {
        push(
            "cross_server_shadowing",
            Severity::High,
            map.get(at).copied().unwrap_or(0),
            "asks for messages to be copied or sent to an address".into(),
        );
    }
}

/// The byte offset of the first instruction tag in folded text.
fn instruction_tag(folded: &str) -> Option<usize> {
    if let Some(at) = folded.find("<|")
        && folded[at + 2..].starts_with(|c: char| c.is_ascii_alphabetic())
    {
        return Some(at);
    }
    for marker in [
        "<<sys>>", "[inst]", "[system]", "[/inst]", "{{system", "[[system",
    ] {
        if let Some(at) = folded.find(marker) {
            return Some(at);
        }
    }
    if let Some(at) = folded.find("<!--")
        && folded[at + 4..]
            .split("-->")
            .next()
            .is_some_and(|c| c.chars().filter(|c| c.is_alphabetic()).count() >= 8)
    {
        return Some(at);
    }
    let mut i = 0;
    // `<word>` tags; square brackets count only as the explicit markers above (`[system]`), so `[note]` in prose
    // does not.
    while let Some(off) = folded[i..].find('<') {
        let at = i + off;
        let rest = &folded[at + 1..];
        if let Some(end) = rest.find('>').filter(|e| *e <= 40) {
            let inner = rest[..end].trim().trim_start_matches('/').trim();
            let name: String = inner
                .chars()
                .map(|c| if c.is_alphanumeric() { c } else { ' ' })
                .collect();
            let ws: Vec<&str> = name.split_whitespace().collect();
            let all_letters = inner
                .chars()
                .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | ' ' | ':'));
            if all_letters
                && !ws.is_empty()
                && ws.len() <= 2
                && !matches!(ws[0], "your" | "the" | "a" | "an" | "my")
                && ws.iter().any(|w| {
                    TAG_WORDS.contains(w)
                        || TAG_WORDS.iter().any(|t| t.len() > 4 && w.starts_with(t))
                })
            {
                return Some(at);
            }
        }
        i = at + 1;
    }
    None
}

/// An email address outside the documentation domains (`example.com` and friends).
fn foreign_address(folded: &str) -> Option<usize> {
    let b = folded.as_bytes();
    let mut from = 0;
    while let Some(off) = folded[from..].find('@') {
        let at = from + off;
        let local_ok = at > 0 && (b[at - 1].is_ascii_alphanumeric() || b[at - 1] == b'.');
        let domain: String = folded[at + 1..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '.' || *c == '-')
            .collect();
        let domain = domain.trim_end_matches('.');
        if local_ok
            && domain.contains('.')
            && ![
                "example.com",
                "example.org",
                "example.net",
                "domain.com",
                "company.com",
                "test.com",
                "contoso.com",
                "fabrikam.com",
            ]
            .iter()
            .any(|d| domain == *d || domain.ends_with(&format!(".{d}")))
        {
            let start = folded[..at]
                .rfind(|c: char| c.is_whitespace())
                .map_or(0, |s| s + 1);
            return Some(start);
        }
        from = at + 1;
    }
    None
}

/// Two different weak signals in one definition together withhold it.
fn combine(out: &mut Vec<Finding>) {
    if out.iter().any(|f| f.severity >= Severity::Medium) {
        return;
    }
    let mut weak: Vec<&'static str> = out
        .iter()
        .filter(|f| f.rule != "soft_hyphen")
        .map(|f| f.rule)
        .collect();
    weak.sort_unstable();
    weak.dedup();
    // Orders to the model and "call this first" are common in honest descriptions; they count only beside a sign of
    // intent (stealth, a secret, another server's tool).
    let intent = weak.iter().any(|r| {
        matches!(
            *r,
            "stealth_wording" | "sensitive_reference" | "mentions_other_server"
        )
    });
    if weak.len() >= 2 && intent {
        let first = out.iter().find(|f| f.rule != "soft_hyphen").cloned();
        if let Some(first) = first {
            out.push(Finding {
                rule: "combined_signals",
                severity: Severity::Medium,
                field: first.field,
                excerpt: first.excerpt,
                detail: format!("several weak signals together: {}", weak.join(", ")),
            });
        }
    }
}

/// A set of words (`a|b|c*`, as one word of a pattern): exact words hashed, prefixes checked in turn.
struct WordSet {
    exact: std::collections::HashSet<String>,
    prefix: Vec<String>,
}

impl WordSet {
    fn new(alternatives: &str) -> WordSet {
        let pattern = Pattern::new(alternatives);
        let (prefix, exact): (Vec<_>, Vec<_>) =
            pattern.first().iter().cloned().partition(|(_, p)| *p);
        WordSet {
            exact: exact.into_iter().map(|(w, _)| w).collect(),
            prefix: prefix.into_iter().map(|(w, _)| w).collect(),
        }
    }

    fn contains(&self, w: &str) -> bool {
        self.exact.contains(w) || self.prefix.iter().any(|p| w.starts_with(p.as_str()))
    }
}

/// Byte offsets in folded text where one of [`PATHS`] starts: one pass, checking only at bytes some path starts with.
fn paths_in(folded: &str) -> Vec<usize> {
    static FIRST: OnceLock<Vec<Vec<usize>>> = OnceLock::new();
    let first = FIRST.get_or_init(|| {
        let mut t = vec![Vec::new(); 256];
        for (k, p) in PATHS.iter().enumerate() {
            t[p.as_bytes()[0] as usize].push(k);
        }
        t
    });
    let b = folded.as_bytes();
    let mut out = Vec::new();
    let mut seen = [false; 64];
    for i in 0..b.len() {
        for &k in &first[b[i] as usize] {
            if !seen[k]
                && b[i..].starts_with(PATHS[k].as_bytes())
                && !(PATHS[k] == ".env."
                    && ["example", "sample", "template", "dist", "defaults"]
                        .iter()
                        .any(|x| b[i + 5..].starts_with(x.as_bytes())))
            {
                seen[k] = true;
                out.push(i);
            }
        }
    }
    out
}

/// Where patterns may start: (group, pattern) by exact first word, and by first-word prefix.
struct Index {
    exact: std::collections::HashMap<String, Vec<(usize, usize)>>,
    /// Prefix alternatives by their first byte.
    prefix: Vec<Vec<(String, usize, usize)>>,
}

impl Index {
    fn new<'a>(groups: impl Iterator<Item = &'a [Pattern]>) -> Index {
        let mut idx = Index {
            exact: Default::default(),
            prefix: vec![Vec::new(); 256],
        };
        for (r, group) in groups.enumerate() {
            for (p, pattern) in group.iter().enumerate() {
                for (word, is_prefix) in pattern.first() {
                    if *is_prefix {
                        let b = word.as_bytes().first().copied().unwrap_or(0) as usize;
                        idx.prefix[b].push((word.clone(), r, p));
                    } else {
                        idx.exact.entry(word.clone()).or_default().push((r, p));
                    }
                }
            }
        }
        idx
    }

    /// The first match of every pattern of every group in `words`: `found[group][pattern]`.
    fn scan(&self, groups: &[&[Pattern]], words: &[&str]) -> Vec<Vec<Option<(usize, usize)>>> {
        let mut found: Vec<Vec<Option<(usize, usize)>>> =
            groups.iter().map(|g| vec![None; g.len()]).collect();
        for (i, w) in words.iter().enumerate() {
            let mut attempt = |r: usize, p: usize| {
                if found[r][p].is_none()
                    && let Some(end) = groups[r][p].at_start(words, i)
                {
                    found[r][p] = Some((i, end));
                }
            };
            if let Some(starts) = self.exact.get(*w) {
                for &(r, p) in starts {
                    attempt(r, p);
                }
            }
            let b = w.as_bytes().first().copied().unwrap_or(0) as usize;
            for (prefix, r, p) in &self.prefix[b] {
                if w.starts_with(prefix.as_str()) {
                    attempt(*r, *p);
                }
            }
        }
        found
    }
}

fn rule_groups() -> &'static (Vec<&'static [Pattern]>, Index) {
    static I: OnceLock<(Vec<&'static [Pattern]>, Index)> = OnceLock::new();
    I.get_or_init(|| {
        let groups: Vec<&'static [Pattern]> = phrase_rules()
            .iter()
            .map(|r| r.patterns.as_slice())
            .collect();
        let idx = Index::new(groups.iter().copied());
        (groups, idx)
    })
}

fn object_index() -> &'static Index {
    static I: OnceLock<Index> = OnceLock::new();
    I.get_or_init(|| Index::new(std::iter::once(objects())))
}

fn move_verbs() -> &'static WordSet {
    static P: OnceLock<WordSet> = OnceLock::new();
    P.get_or_init(|| WordSet::new(MOVE))
}

fn name_nouns() -> &'static WordSet {
    static P: OnceLock<WordSet> = OnceLock::new();
    P.get_or_init(|| WordSet::new(NAME_NOUNS))
}

fn reach_verbs() -> &'static WordSet {
    static P: OnceLock<WordSet> = OnceLock::new();
    P.get_or_init(|| WordSet::new(REACH))
}

/// Words a description uses when it *describes* attacks or dangerous input rather than asking for them (a security
/// scanner's own tool: "detects phrases such as ...", "commands like `rm -rf /` are blocked").
const DESCRIBING: &[&str] = &[
    "such",
    "like",
    "eg",
    "detect",
    "detects",
    "detected",
    "detection",
    "flag",
    "flags",
    "flagged",
    "scan",
    "scans",
    "block",
    "blocks",
    "blocked",
    "identify",
    "identifies",
    "warn",
    "warns",
    "examples",
    "attempts",
    "phrases",
    "patterns",
    "catch",
    "catches",
    "prevent",
    "prevents",
    "refuse",
    "refuses",
    "rejected",
    "rejects",
    "denied",
    "injection",
    "skipped",
    "excluded",
    "never",
    "redacted",
    "masked",
    "analysed",
    "analyzed",
];

/// The sentence around word `i`: the words between the punctuation that ends sentences is not known here (tokens
/// drop it), so a window of eight words either side stands for it.
fn sentence(words: &[&str], i: usize) -> std::ops::Range<usize> {
    i.saturating_sub(8)..(i + 8).min(words.len())
}

/// Whether the words around `i` describe rather than ask.
fn described(words: &[&str], i: usize) -> bool {
    words[sentence(words, i)]
        .iter()
        .any(|w| DESCRIBING.contains(w))
}

/// Words saying the thing named is refused or hidden: "paths such as ~/.ssh are always rejected", "values are
/// redacted", "potentially destructive commands (`rm -rf`)".
const REFUSING: &[&str] = &[
    "rejected",
    "refused",
    "blocked",
    "denied",
    "excluded",
    "skipped",
    "redacted",
    "masked",
    "destructive",
    "dangerous",
    "potentially",
    "caution",
    "careful",
];

fn refused(words: &[&str], i: usize) -> bool {
    words[i.saturating_sub(14)..(i + 14).min(words.len())]
        .iter()
        .any(|w| REFUSING.contains(w))
}

/// Whether byte `at` of `raw` sits inside a quotation ('…', "…", “…”): a phrase quoted as an example of what to
/// look for, not an order.
fn in_quotes(raw: &str, at: usize) -> bool {
    let at = at.min(raw.len());
    let before = &raw[..at];
    let after = &raw[at..];
    let opener = before.char_indices().rev().take(80).find_map(|(i, c)| {
        let boundary = before[..i]
            .chars()
            .next_back()
            .is_none_or(|p| !p.is_alphanumeric());
        match c {
            '\'' | '"' if boundary => Some(c),
            '“' | '‘' | '«' => Some(c),
            '.' | '!' | '?' | '\n' => Some('x'),
            _ => None,
        }
    });
    let close = match opener {
        Some('\'') => '\'',
        Some('"') => '"',
        Some('“') => '”',
        Some('‘') => '’',
        Some('«') => '»',
        _ => return false,
    };
    after.char_indices().take(120).any(|(i, c)| {
        c == close
            && after[i + c.len_utf8()..]
                .chars()
                .next()
                .is_none_or(|n| !n.is_alphanumeric())
    })
}

/// Whether the words around `i` give an order all the same ("you must", "always", "before", "please").
fn ordered_sentence(words: &[&str], i: usize) -> bool {
    words[sentence(words, i)].iter().any(|w| {
        matches!(
            *w,
            "must"
                | "always"
                | "please"
                | "ensure"
                | "before"
                | "first"
                | "immediately"
                | "otherwise"
        )
    })
}

/// Whether a match from word `start` to `end` is about this very server ("any other tool of this server", "other
/// CircleCI tools" on the server named circleci).
fn own_scope(words: &[&str], start: usize, end: usize, server: &[String]) -> bool {
    let tail = &words[end.min(words.len())..(end + 4).min(words.len())];
    tail.windows(2).any(|w| {
        w[0] == "this"
            && matches!(
                w[1],
                "server" | "mcp" | "service" | "integration" | "toolkit" | "plugin"
            )
    }) || words[start..(end + 2).min(words.len())]
        .iter()
        .any(|w| w.len() >= 3 && server.iter().any(|s| s == w))
}
