// What the page shows, shared by its views.

export const state = {
  /** The customer's endpoints. @type {any[]} */ endpoints: [],
  /** Event types the stage has seen, for the add form. @type {string[]} */ eventTypes: [],
  /** The deliveries listed, newest first. @type {any[]} */ deliveries: [],
  /** The next page of deliveries; null: none. @type {string | null} */ cursor: null,
  filter: { endpointId: '', status: '' },
  /** The delivery shown in its dialog. @type {string | null} */ openDelivery: null,
  /** The link expired or was refused: nothing more is shown or said. */
  ended: false,
};

/** An endpoint as the customer knows it: its URL. */
export function endpointLabel(endpointId) {
  return state.endpoints.find((e) => e.id === endpointId)?.url ?? endpointId;
}
