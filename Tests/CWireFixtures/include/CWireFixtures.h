int cwf_placeholder(void);
