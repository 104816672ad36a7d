// Elements are built from text, never from HTML strings: nothing a row, a file name or an
// error message holds can become markup.
export function h(tag, attrs = {}, ...children) {
    const el = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs)) {
        if (value === undefined || value === false)
            continue;
        if (typeof value === "function")
            el.addEventListener(name.replace(/^on/, ""), value);
        else if (value === true)
            el.setAttribute(name, "");
        else
            el.setAttribute(name, value);
    }
    for (const child of children.flat()) {
        if (child === null || child === undefined || child === false)
            continue;
        el.append(child instanceof Node ? child : String(child));
    }
    return el;
}
export function replace(target, ...children) {
    target.replaceChildren();
    for (const child of children.flat()) {
        if (child === null || child === undefined || child === false)
            continue;
        target.append(child instanceof Node ? child : String(child));
    }
}
// A place for a message: an error in red, or a note.
export function notice(text, kind = "error") {
    return h("p", { class: `notice ${kind}`, role: kind === "error" ? "alert" : "status" }, text);
}
// A value as a cell shows it: null apart from the text "null", objects as JSON.
export function cellText(value) {
    if (value === null || value === undefined)
        return "NULL";
    if (typeof value === "object")
        return JSON.stringify(value);
    return String(value);
}
export function button(label, onClick, kind) {
    const b = h("button", { type: "button", class: kind }, label);
    b.addEventListener("click", () => void onClick());
    return b;
}
// A button whose action's failure is shown in `message`; with `ask`, it runs once confirmed.
export function action(label, message, run, options = {}) {
    return button(label, async () => {
        if (options.ask && !confirm(options.ask))
            return;
        try {
            await run();
        }
        catch (e) {
            replace(message, notice(e.message));
        }
    }, options.kind);
}
