// Progressive: the pages work without this file. It only adds a "select all" box to
// the inbox.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  const all = document.getElementById("select-all");
  const boxes = () => document.querySelectorAll('input[type=checkbox][name=id][form=several]');
  if (all && boxes().length) {
    all.hidden = false;
    document.getElementById("select-all-label").hidden = false;
    all.addEventListener("change", () => boxes().forEach((b) => { b.checked = all.checked; }));
  }
});
